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
from dataclasses import replace

from jaxcache.records.run_document import RunRecord, UsedDir
from jaxcache.text import safe
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from jaxcache.records.probe_output import ProbeOutput



def _norm(path: str | None) -> str | None:
    if path is None or is_url(path):
        return path
    return os.path.normpath(os.path.abspath(path))


def collect(probes: Iterable[ProbeOutput], audited: str) -> tuple[UsedDir, ...]:
    """One entry per (directory, what the guard did, how), over every probed process: the
    record's `jax_cache_dirs`."""
    out: dict[tuple[object, ...], UsedDir] = {}
    want = _norm(audited)
    for probe in probes:
        for e in probe.cache_dirs:
            ident = (e.path, e.status, e.how)
            found = out.get(ident)
            if found is None:
                out[ident] = UsedDir(e.path, e.status, e.how, e.reason,
                                     _norm(e.path) == want or e.how == "sealed", (e.pid,),
                                     None, None)
            elif e.pid not in found.pids:
                out[ident] = replace(found, pids=(*found.pids, e.pid))
    return tuple(out.values())


def judge(entries: Iterable[UsedDir], policy: str | None) -> tuple[UsedDir, ...]:
    """The entries, each directory that is not the audited one with its own verdict, audited
    now (and why: its untrusted writers, or that it is gone). What cannot be judged is
    UNVERIFIABLE."""
    return tuple(e if e.audited_dir else _judged(e, policy) for e in entries)


def _judged(used: UsedDir, policy: str | None) -> UsedDir:
    from jaxcache.errors import JaxcacheError

    try:
        from jaxcache import api
        from jaxcache.trust.kernel.principals import Trust  # only where one is judged

        report = api.audit(str(used.path), policy=policy, scan_processes=False)
    except (JaxcacheError, OSError) as exc:
        return replace(used, verdict="UNVERIFIABLE", verdict_detail=str(exc))
    writers = sorted(report.writer_names(Trust.UNTRUSTED))
    detail = "does not exist after the job" if not report.exists else \
        "writers: " + ", ".join(writers) if writers else used.verdict_detail
    return replace(used, verdict=report.verdict.value, verdict_detail=detail)


def unaudited(record: RunRecord) -> list[UsedDir]:
    """Directories JAX was pointed at other than the audited one."""
    return [e for e in record.jax_cache_dirs if not e.audited_dir]


def failing(record: RunRecord) -> list[UsedDir]:
    """Those that make the run not fine: refused, or not trusted by their own audit."""
    return [e for e in unaudited(record) if e.status == "refused" or not _may_load(e.verdict)]


def _may_load(verdict: str | None) -> bool:
    """A verdict as the record holds it, judged by the one rule (Verdict.ok); a word this
    version does not know may not load."""
    from jaxcache.trust.findings import Verdict

    try:
        return verdict is not None and Verdict(verdict).ok
    except ValueError:
        return False


def describe(e: UsedDir) -> str:
    """One sentence for the summary and explain."""
    verdict = safe(str(e.verdict or "not audited"))
    detail = f": {safe(str(e.verdict_detail))}" if e.verdict_detail else ""
    what = {"refused": "jaxcache refused it (nothing was loaded from or written there)",
            "served": f"JAX used it ({safe(str(e.how))})"}.get(
                str(e.status), safe(str(e.status)))
    return (f"JAX was pointed at {safe(str(e.path))} ({verdict}{detail}), not the "
            f"audited cache: {what}")


def canonical(path: str) -> str:
    """A cache directory's one name: a URL as given, a path absolute and normalized."""
    return _norm(path) or path


def same_dir(a: str | None, b: str | None) -> bool:
    """Two names of one cache directory: the same URL (but a trailing slash), or the same path
    once made absolute
    (and, where both exist, once links are resolved)."""
    if a is None or b is None:
        return False
    if is_url(a) or is_url(b):
        return a.rstrip("/") == b.rstrip("/")
    if _norm(a) == _norm(b):
        return True
    try:  # a name a record holds is the writer's: it may not be a path at all (a NUL, a lone
        return os.path.realpath(a) == os.path.realpath(b)  # surrogate): then it is not `b`
    except (ValueError, OSError):
        return False


def used(record: RunRecord, cache: str) -> bool:
    """Whether the run used `cache`: its audited cache directory, or one JAX was pointed at
    and the guard served (a refused one was not used: nothing was loaded or written there)."""
    if same_dir(record.cache_dir.path_given, cache):
        return True
    return any(e.status == "served" and same_dir(e.path, cache)
               for e in record.jax_cache_dirs)


def runs_of(cache: str, directory: str | None = None) -> tuple[RunRecord, ...]:
    """The run records in `directory` (default: the state directory's) of jobs that used
    `cache` (used()), newest first; look-alikes are skipped (record_dir)."""
    from jaxcache.records import record_dir

    where = directory if directory is not None else record_dir.runs_dir()
    records = (RunRecord.from_json(r.doc) for r in record_dir.scan(where).records)
    return tuple(record for record in records if record.argv and used(record, cache))


def jobs_of(cache: str, directory: str | None = None) -> tuple[tuple[str, ...], ...]:
    """The commands of the jobs that used `cache` (runs_of()), newest first, each once.
    decide names them when it has no bench of this cache's jobs, seal --from when it tells
    which job to rerun."""
    return tuple(dict.fromkeys(record.argv for record in runs_of(cache, directory)))
