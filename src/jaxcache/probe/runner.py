"""A finished run of a program under the probe, as the record and the bench see it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.probe.launch import CommandError, Ran, launch, resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CommandError", "Outcome", "resolve", "run"]


@dataclass(frozen=True, slots=True)
class Outcome:
    argv: tuple[str, ...]
    pid: int
    exit_code: int | None
    signal: int | None
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_bytes: int
    probes: tuple[dict[str, Any], ...]  # what each probed process wrote; the main one first
    timed_out: bool = False

    @property
    def status(self) -> int:
        """The exit status a shell would report: the code, or 128 + signal."""
        return self.exit_code if self.exit_code is not None else 128 + (self.signal or 0)


def outcome(argv: list[str], ran: Ran) -> Outcome:
    code = os.waitstatus_to_exitcode(ran.status)
    usage = ran.usage
    return Outcome(tuple(argv), ran.pid, code if code >= 0 else None,
                   -code if code < 0 else None, ran.wall_s, usage.ru_utime, usage.ru_stime,
                   usage.ru_maxrss * 1024, ran.probes, ran.timed_out)


def run(argv: list[str], env: dict[str, str], **options: Any) -> Outcome:
    """launch() (see probe/launch.py) and the Outcome of it."""
    return outcome(argv, launch(argv, env, **options))
