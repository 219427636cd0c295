"""Live progress for a bench on stderr: trial i of T, current phase, elapsed and ETA; handed
to bench/trials.py, which tells it of each run (a RunEvent).

Standard library only: a terminal gets one line redrawn every second by a daemon thread (so
elapsed time and the ETA keep moving while a run is in progress); anything else (a log, CI,
TERM=dumb, which cannot redraw a line) gets one plain line per run. The ETA appears once a
cold and a warm run have been measured: guessing warm from cold doubled the first estimate.
"""

from __future__ import annotations

import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

    from jaxcache.bench.trials import RunEvent

TICK_S = 1.0


def live_capable(stream: IO[str]) -> bool:
    """Can `stream` redraw a line in place? A terminal that is not TERM=dumb."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM", "") not in ("dumb", "")


class BenchProgress:
    """Called with each run's event; close() when the bench ends (also on errors)."""

    def __init__(self, warm: int, *, stream: IO[str] | None = None,
                 live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.warm = warm
        self.stream = stream or sys.stderr
        self.clock = clock  # the ETA's arithmetic is checked on a clock a test moves
        self.start = clock()
        self.durations: dict[str, list[float]] = {"prime": [], "cold": [], "warm": []}
        self.current: tuple[str, float] | None = None
        self.what = ""
        self.eta_at: tuple[float, float] | None = None  # (ETA in s, when it was computed)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.live = live_capable(self.stream) if live is None else live
        self.thread: threading.Thread | None = None
        if self.live:
            self.thread = threading.Thread(target=self._tick, name="jaxcache-progress",
                                           daemon=True)
            self.thread.start()

    def _mean(self, kind: str) -> float | None:
        runs = self.durations[kind]
        return sum(runs) / len(runs) if runs else None

    def eta(self, event: RunEvent) -> float | None:
        """Seconds left after this event's run starts, from the runs measured so far."""
        cold = self._mean("cold") or self._mean("prime")  # the priming run is a cold run
        warm = self._mean("warm") if self.warm else 0.0
        if cold is None or warm is None:
            return None
        done_trials = event.trial - 1 if event.phase != "prime" else 0
        left: float = (event.trials - done_trials) * (cold + self.warm * warm)
        if event.phase == "warm":
            left -= cold + (event.warm - 1) * warm
        return max(0.0, left)

    def line(self, now: float) -> str:
        """The progress text at `now`: the ETA counts down between events."""
        text = f"{self.what} | elapsed {now - self.start:.0f} s"
        if self.eta_at is not None:
            eta, at = self.eta_at
            text += f" | ETA {max(0.0, eta - (now - at)):.0f} s"
        return text

    def __call__(self, event: RunEvent) -> None:
        now = self.clock()
        with self.lock:
            if self.current is not None:
                kind, began = self.current
                self.durations[kind].append(now - began)
            self.current = (event.phase, now)
            self.what = _describe(event)
            eta = self.eta(event)
            self.eta_at = None if eta is None else (eta, now)
            if self.live:
                self._draw(now)
            else:
                self.stream.write(f"jaxcache bench: {self.line(now)}\n")
                self.stream.flush()

    def _draw(self, now: float) -> None:
        self.stream.write(f"\r\x1b[2Kjaxcache bench: {self.line(now)}")
        self.stream.flush()

    def _tick(self) -> None:
        while not self.stop.wait(TICK_S):
            with self.lock:
                if self.what:
                    self._draw(self.clock())

    def close(self) -> None:
        """Stop ticking and erase the live line, so the report starts on a clean line."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def _describe(event: RunEvent) -> str:
    if event.phase == "prime":
        return "priming run (warms the OS file cache; discarded)"
    if event.phase == "cold":
        return f"trial {event.trial} of {event.trials}: cold run"
    return (f"trial {event.trial} of {event.trials}: warm run "
            f"{event.warm} of {event.warms}")
