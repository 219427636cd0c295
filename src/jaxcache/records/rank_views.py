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
from jaxcache.records.run_document import CacheView, ProcessEntry, RankProblem, Ranks, RunRecord
from jaxcache.text import safe
from jaxcache.trust.rules.target import is_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

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


def _label(proc: ProcessEntry, rank: int | None) -> str:
    who = f"rank {rank}" if rank is not None else "process"
    pid = proc.entry_pid if proc.pid_given else "?"
    return f"{who} (pid {pid}, host {safe(str(proc.host))})"


def check(record: RunRecord, env: Mapping[str, str]) -> Ranks:
    """What the record's probes say about the ranks of the job. per_rank: jaxcache runs as
    one rank of the launch, and each rank records itself."""
    procs = [p for p in record.processes if p.has_identity]
    counts = [p.process_count for p in procs]
    expected = max((c for c in counts if c is not None), default=None)
    seen = sorted({r for r in (p.rank for p in procs) if r is not None})
    runner = ranks.detect(dict(env))
    absent: list[int] = []
    per_rank = runner.multi and set(seen) <= {runner.rank}  # `srun jaxcache run ...`
    if expected and expected > 1 and not per_rank:
        absent = [r for r in range(expected) if r not in seen]  # else: each rank records itself
    problems = [RankProblem(r, None, "absent",
                            f"rank {r}: JAX counts {expected} processes, but no probe reported "
                            f"rank {r}: it ran where jaxcache could not see it (another host, "
                            "or a Python without the probe), against a cache directory nobody "
                            "audited there") for r in absent]
    audited_path = record.cache_dir.path_given
    audited = _audited(audited_path)
    here = os.uname().nodename
    viewed = sorted(((p.rank, p, p.cache_view) for p in procs if p.cache_view is not None),
                    key=lambda rpv: (rpv[0] is None, rpv[0] or 0))
    for i, (rank, p, view) in enumerate(viewed):
        problems += _differences(rank, p, view, None if i == 0 else viewed[0][2],
                                 audited_path, audited, here)
    return Ranks(expected, tuple(seen), per_rank, tuple(problems),
                 REMEDY if problems else None, tuple(absent))


def _differences(rank: int | None, p: ProcessEntry, view: CacheView,
                 reference: CacheView | None, audited_path: str | None,
                 audited: tuple[str, int] | None, here: str) -> list[RankProblem]:
    """What differs in one process's view: from the audited directory, and (reference: the
    lowest rank's view, None for that rank itself) from the other ranks'."""
    who = _label(p, rank)
    host = p.host
    out: list[tuple[str, str]] = []
    if view.source != "audited":  # not a directory this run audited: nothing to match
        audited_path = audited = None
    if host and host != here:
        out.append(("host", f"ran on host {safe(host)}, not on {safe(here)} where jaxcache "
                            "audited the directory"))
    if view.path and audited_path and view.path != audited_path:
        out.append(("path", f"its cache path is {safe(view.path)}, not the audited "
                            f"{safe(audited_path)}"))
    elif view.error:
        out.append(("view", f"cannot see the cache directory {safe(str(view.path))} "
                            f"({safe(view.error)})"))
    elif audited and view.device and (view.device, view.inode) != audited:
        out.append(("filesystem", f"sees another directory at {safe(str(view.path))} "
                    f"({safe(str(view.fs_type))} {view.device}, inode "
                    f"{view.inode}, mode {view.mode}, uid {view.uid}) than "
                    f"the one jaxcache audited ({audited[0]}, inode {audited[1]}): another "
                    "host or mount namespace; nothing vouches for what JAX loads there"))
    if reference is not None:
        for name, mine, lowest in (("jaxlib", view.jaxlib, reference.jaxlib),
                                   ("XLA_FLAGS", view.xla_flags, reference.xla_flags)):
            if mine != lowest:
                key = "jaxlib" if name == "jaxlib" else "xla_flags"
                out.append((key, f"{name} {safe(repr(mine))}, while the lowest rank has "
                                 f"{safe(repr(lowest))}: their cache keys differ, so "
                                 "they share no entry"))
    return [RankProblem(rank, p.entry_pid, what, f"{who}: {text}") for what, text in out]
