"""Did every rank of the job see the cache jaxcache audited? (`jaxcache run -- srun ...`)

jaxcache audits the directory on its own host, in its own mount namespace. A rank elsewhere
(another host, a container, `unshare -m`) can find another directory at the same path, and
JAX there loads whatever it holds. Each rank's probe reports its view (`cache_view`: the
filesystem and inode the path resolves to, jaxlib, XLA_FLAGS); a rank whose view differs from
the audited directory or from the other ranks, and a rank JAX counts but no probe reported,
is named, and the run exits non-zero.
"""

from __future__ import annotations

import os

from jaxcache.probe import rank_identity as ranks
from jaxcache.records.reading import processes, rank_of
from jaxcache.text import safe
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.values import JsonObject

REMEDY = ("run jaxcache inside the launcher (`srun jaxcache run ...`, `mpirun jaxcache run "
          "...`) so that each rank audits its own view before JAX sees the directory; with "
          "`srun --kill-on-bad-exit=1` a rank that is refused stops the whole step")


def _audited(path: str | None) -> tuple[str, int] | None:
    """(device, inode) of the audited directory, seen from here."""
    if not path or is_url(path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino


def _label(proc: JsonObject, rank: int | None) -> str:
    ident = proc.get("identity") or {}
    who = f"rank {rank}" if rank is not None else "process"
    return f"{who} (pid {proc.get('pid', '?')}, host {safe(str(ident.get('host')))})"


def check(doc: JsonObject, env: dict[str, str]) -> JsonObject:
    """{"expected", "seen", "absent", "per_rank", "problems": [{"rank", "pid", "what",
    "text"}], "remedy"}: what the record's probes say about the ranks of the job. per_rank:
    jaxcache runs as one rank of the launch, and each rank records itself."""

    procs = [p for p in processes(doc) if p.get("identity")]
    if not doc.get("identity"):
        procs = [p for p in procs if p is not doc]
    counts = [(p.get("identity") or {}).get("process_count") for p in procs]
    expected = max((c for c in counts if isinstance(c, int)), default=None)
    seen = sorted({r for r in (rank_of(p) for p in procs) if r is not None})
    runner = ranks.detect(env)
    absent: list[int] = []
    per_rank = runner.multi and set(seen) <= {runner.rank}  # `srun jaxcache run ...`
    if expected and expected > 1 and not per_rank:
        absent = [r for r in range(expected) if r not in seen]  # else: each rank records itself
    problems = [{"rank": r, "pid": None, "what": "absent",
                 "text": f"rank {r}: JAX counts {expected} processes, but no probe reported "
                         f"rank {r}: it ran where jaxcache could not see it (another host, or "
                         "a Python without the probe), against a cache directory nobody "
                         "audited there"} for r in absent]
    audited_path = (doc.get("cache_dir") or {}).get("path")
    audited = _audited(audited_path)
    here = os.uname().nodename
    viewed = sorted(((rank_of(p), p) for p in procs if p.get("cache_view")),
                    key=lambda rp: (rp[0] is None, rp[0] or 0))
    reference = viewed[0][1]["cache_view"] if viewed else {}
    for rank, p in viewed:
        problems += _differences(rank, p, reference, audited_path, audited, here)
    return {"expected": expected, "seen": seen, "absent": absent, "per_rank": per_rank,
            "problems": problems, "remedy": REMEDY if problems else None}


def _differences(rank: int | None, p: JsonObject, reference: JsonObject, audited_path: str | None,
                 audited: tuple[str, int] | None, here: str) -> list[JsonObject]:
    view, who = p["cache_view"], _label(p, rank)
    host = (p.get("identity") or {}).get("host")
    out: list[tuple[str, str]] = []
    if view.get("source") != "audited":  # not a directory this run audited: nothing to match
        audited_path = audited = None
    if host and host != here:
        out.append(("host", f"ran on host {safe(host)}, not on {safe(here)} where jaxcache "
                            "audited the directory"))
    if view.get("path") and audited_path and view["path"] != audited_path:
        out.append(("path", f"its cache path is {safe(view['path'])}, not the audited "
                            f"{safe(audited_path)}"))
    elif view.get("error"):
        out.append(("view", f"cannot see the cache directory {safe(str(view.get('path')))} "
                            f"({safe(str(view['error']))})"))
    elif audited and view.get("device") and (view["device"], view.get("inode")) != audited:
        out.append(("filesystem", f"sees another directory at {safe(str(view.get('path')))} "
                    f"({safe(str(view.get('fs_type')))} {view['device']}, inode "
                    f"{view.get('inode')}, mode {view.get('mode')}, uid {view.get('uid')}) than "
                    f"the one jaxcache audited ({audited[0]}, inode {audited[1]}): another "
                    "host or mount namespace; nothing vouches for what JAX loads there"))
    for key, name in (("jaxlib", "jaxlib"), ("xla_flags", "XLA_FLAGS")):
        if view is not reference and view.get(key) != reference.get(key):
            out.append((key, f"{name} {safe(repr(view.get(key)))}, while the lowest rank has "
                             f"{safe(repr(reference.get(key)))}: their cache keys differ, so "
                             "they share no entry"))
    return [{"rank": rank, "pid": p.get("pid"), "what": what, "text": f"{who}: {text}"}
            for what, text in out]
