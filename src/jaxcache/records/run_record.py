"""The run record: one JSON document per `jaxcache run`, the data every later step reads.

Here a job is run with the probe and its record finished (the cache directory before, the
run, the directory after), written, and read back. Building the record (run_document.py's
RunRecord) from the probes' documents is builder.py's (its names are this module's
too: callers import them from here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.records import used_dirs
from jaxcache.records.builder import RunAudit, build, env_snapshot
from jaxcache.records.dir_snapshot import DirSnapshot, ListingBeside
from jaxcache.records.run_document import RunRecord  # used_dirs reads it too: no extra cost

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.documents.claim import Output, Unclaimed
    from jaxcache.probe.runner import Outcome

__all__ = ["DirSnapshot", "ListingBeside", "RunAudit", "RunResult", "build", "capture",
           "env_snapshot", "finish", "load", "load_all", "write"]


def capture(argv: list[str], env: dict[str, str], cache_dir: str, *, verdict: str,
            before: DirSnapshot | None = None, missing_ok: bool = True,
            **run_options: object) -> tuple[RunRecord, Outcome]:
    """Run a job with the probe against `cache_dir` and build its record (not yet written):
    the cache directory before, the run itself, the directory after."""
    from jaxcache.probe import runner

    if before is None:
        before = DirSnapshot.at(cache_dir, missing_ok=missing_ok)
    outcome = runner.run(argv, env, **run_options)
    return finish(outcome, cache_dir, verdict=verdict, before=before, env=env,
                  missing_ok=missing_ok), outcome


def finish(outcome: Outcome, cache_dir: str, *, verdict: str, before: DirSnapshot,
           env: dict[str, str], missing_ok: bool = True,
           run: RunAudit | None = None) -> RunRecord:
    """The record of a run that has ended: the directory after (listed now), and everything
    else (with `run`, what `jaxcache run` adds: builder.RunAudit)."""
    if before.unchanged():
        after = before  # counted, not listed, and no name changed since: not listed now either
    else:
        before = before.listed()
        after = DirSnapshot.at(cache_dir, missing_ok=missing_ok).since(before)
    return build(outcome, cache_dir=cache_dir, verdict=verdict, before=before, after=after,
                 env=env, cwd=os.getcwd(), run=run)


@dataclass(frozen=True, slots=True)
class RunResult:
    record: RunRecord
    record_path: str
    outcome: Outcome
    record_error: str | None = None  # the job ran, but its record could not be written
    # why the records folder's copy of a --record FILE could not be written (None: it was, or
    # none was made)
    kept_error: str | None = None

    @property
    def exit_code(self) -> int:
        """`jaxcache run`'s status: the job's own, except that a job which exited 0 after JAX
        was pointed at a directory jaxcache refused or does not trust exits 1, and one whose
        JAX turned out unsupported (without --unverified-jax) exits 2. So does (1) one where
        a rank's view of the cache differs or a rank went unseen (rank_views)."""
        status, record = self.outcome.status, self.record
        if record.unverified and not record.unverified_allowed:  # --unverified-jax
            return status or 2
        if status == 0 and (used_dirs.failing(record) or record.ranks.problems):
            return 1
        return status


def write(record: RunRecord, out: Output | Unclaimed) -> None:
    """Write the record into its claimed target (an outputs.Output): whole, atomically, never
    over a file that is not ours."""
    import json

    out.write(json.dumps(record.to_json(), indent=2) + "\n")


def load(path: str, also: frozenset[int] = frozenset()) -> RunRecord:
    """Read a record (through the trusted-input loader, bounded and checked), refusing what
    this version cannot understand or what explain could not use; parsed once, here. `also`:
    owners besides you and root (the users a policy trusts for the cache judged)."""
    from jaxcache.documents.read import load_record

    return RunRecord.from_json(load_record(path, also))


def load_all(paths: list[str], skipped: list[tuple[str, str]] | None = None,
             also: frozenset[int] = frozenset()) -> list[tuple[str, RunRecord]]:
    """Records named on the command line; a directory stands for the records in it (the
    per-rank records of one job: `r.rank0.json`, `r.rank1.json`...), in name order.
    A file named on the command line that cannot be read ends it (exit 2); one found in a
    directory is skipped, (path, why) appended to `skipped`, unless none there can be read."""
    import os

    from jaxcache.errors import JaxcacheError
    from jaxcache.text import safe

    out = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.endswith(".json"))
            if not names:
                raise JaxcacheError(f"{safe(path)}: a directory with no .json run records in it")
            here, refused = [], []
            for n in names:
                full = os.path.join(path, n)
                try:
                    here.append((full, load(full, also)))
                except JaxcacheError as exc:
                    refused.append((full, str(exc).splitlines()[0]))
            if not here:
                raise JaxcacheError(f"{safe(path)}: none of its {len(names)} .json files is a "
                                    f"run record jaxcache can read (first: {refused[0][1]})")
            out += here
            if skipped is not None:
                skipped += refused
        else:
            out.append((path, load(path, also)))
    return out
