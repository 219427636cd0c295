"""The directories JAX really used in a run, next to the one jaxcache audited.

A job can point JAX elsewhere itself (jax.config.update, set_cache_dir, its own
jaxcache.enable()). Under `jaxcache run` the probe's guard (jaxcompat.guard_cache_dirs) serves
the audited directory and refuses any other, unless an enable() in the job audited it on the
spot. The record keeps every directory JAX initialized a cache for, with what the guard did;
`jaxcache run` audits each one that is not the audited directory after the job, so the summary
can name it first with its own verdict, and the run does not exit 0 for it.
"""

from __future__ import annotations

import os

from jaxcache.text import safe
from jaxcache.trust.kernel.principals import Trust
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.values import JsonObject

OK_VERDICTS = ("PRIVATE", "SHARED-BY-POLICY", "SEALED")


def _norm(path: str | None) -> str | None:
    if path is None or is_url(path):
        return path
    return os.path.normpath(os.path.abspath(path))


def collect(probes: tuple[JsonObject, ...], audited: str) -> list[JsonObject]:
    """One entry per (directory, what the guard did, how), over every probed process."""
    out: dict[tuple[object, ...], JsonObject] = {}
    want = _norm(audited)
    for probe in probes:
        for e in probe.get("cache_dirs") or []:
            if not isinstance(e, dict) or not isinstance(e.get("path"), str):
                continue
            ident = (e["path"], e.get("status"), e.get("how"))
            entry = out.setdefault(ident, {
                "path": safe(e["path"]), "status": e.get("status"), "how": e.get("how"),
                "reason": e.get("reason"),
                "audited_dir": _norm(e["path"]) == want or e.get("how") == "sealed",
                "pids": [], "verdict": None, "verdict_detail": None})
            pid = e.get("pid")
            if pid not in entry["pids"]:
                entry["pids"].append(pid)
    return list(out.values())


def judge(entries: list[JsonObject], policy: str | None) -> None:
    """Audit, now, every directory that is not the audited one (fills verdict and
    verdict_detail in place). What cannot be judged is UNVERIFIABLE."""
    from jaxcache.errors import JaxcacheError

    for entry in entries:
        if entry["audited_dir"]:
            continue
        try:
            from jaxcache import api

            report = api.audit(entry["path"], policy=policy, scan_processes=False)
        except (JaxcacheError, OSError) as exc:
            entry["verdict"], entry["verdict_detail"] = "UNVERIFIABLE", str(exc)
            continue
        entry["verdict"] = report.verdict.value
        writers = sorted(report.writer_names(Trust.UNTRUSTED))
        if not report.exists:
            entry["verdict_detail"] = "does not exist after the job"
        elif writers:
            entry["verdict_detail"] = "writers: " + ", ".join(writers)


def unaudited(doc: JsonObject) -> list[JsonObject]:
    """Directories JAX was pointed at other than the audited one (from a record)."""
    found = doc.get("jax_cache_dirs")
    return [e for e in found if isinstance(e, dict) and not e.get("audited_dir")] \
        if isinstance(found, list) else []


def failing(doc: JsonObject) -> list[JsonObject]:
    """Those that make the run not fine: refused, or not trusted by their own audit."""
    return [e for e in unaudited(doc)
            if e.get("status") == "refused" or e.get("verdict") not in OK_VERDICTS]


def describe(e: JsonObject) -> str:
    """One sentence for the summary and explain."""
    verdict = safe(str(e.get("verdict") or "not audited"))
    detail = f": {safe(str(e['verdict_detail']))}" if e.get("verdict_detail") else ""
    what = {"refused": "jaxcache refused it (nothing was loaded from or written there)",
            "served": f"JAX used it ({safe(str(e.get('how')))})"}.get(
                str(e.get("status")), safe(str(e.get("status"))))
    return (f"JAX was pointed at {safe(str(e.get('path')))} ({verdict}{detail}), not the "
            f"audited cache: {what}")
