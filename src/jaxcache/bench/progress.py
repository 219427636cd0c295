"""Live progress for a bench on stderr: trial i of T, current phase, elapsed and ETA."""

from __future__ import annotations

import sys
import time


class BenchProgress:
    """rich's live line on a terminal; one plain line per run otherwise (logs, CI)."""

    def __init__(self, warm: int, *, stream=None) -> None:
        self.warm = warm
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.durations: dict[str, list[float]] = {"prime": [], "cold": [], "warm": []}
        self.current: tuple[str, float] | None = None
        self.live = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(file=self.stream), refresh_per_second=4,
                             transient=True)
            self.live.start()

    def _eta(self, event: dict) -> float | None:
        cold = self.durations["cold"] or self.durations["prime"]
        warm = self.durations["warm"] or cold
        if not cold:
            return None
        done_trials = event["trial"] - 1 if event["phase"] != "prime" else 0
        left_trials = event["trials"] - done_trials
        per_trial = sum(cold) / len(cold) + self.warm * sum(warm) / len(warm)
        spent_in_trial = 0.0
        if event["phase"] == "warm":
            spent_in_trial = sum(cold) / len(cold) + (event["warm"] - 1) * sum(warm) / len(warm)
        return max(0.0, left_trials * per_trial - spent_in_trial)

    def __call__(self, event: dict) -> None:
        now = time.monotonic()
        if self.current is not None:
            kind, began = self.current
            self.durations[kind].append(now - began)
        self.current = (event["phase"], now)
        if event["phase"] == "prime":
            what = "priming run (warms the OS file cache; discarded)"
        elif event["phase"] == "cold":
            what = f"trial {event['trial']} of {event['trials']}: cold run"
        else:
            what = (f"trial {event['trial']} of {event['trials']}: warm run "
                    f"{event['warm']} of {event['warms']}")
        eta = self._eta(event)
        line = f"{what} | elapsed {now - self.start:.0f} s" + (
            f" | ETA {eta:.0f} s" if eta is not None else "")
        if self.live is not None:
            from rich.text import Text

            self.live.update(Text(line))
        else:
            self.stream.write(f"jaxcache bench: {line}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
