"""The bench progress line: ticks on a real terminal (a pty), plain lines elsewhere and with
TERM=dumb, and an ETA only from measured runs."""

from __future__ import annotations

import io
import os
import re
import select
import time

from jaxcache.bench.trials import RunEvent
from jaxcache.report.bench.progress import BenchProgress, live_capable


def _events(trials: int, warms: int):
    yield RunEvent("prime", 0, trials)
    for t in range(1, trials + 1):
        yield RunEvent("cold", t, trials)
        for k in range(1, warms + 1):
            yield RunEvent("warm", t, trials, k, warms)


def _drain(fd: int) -> str:
    """Everything written to the pty so far (a read returns one chunk at a time)."""
    chunks = []
    while select.select([fd], [], [], 0.2)[0]:
        chunks.append(os.read(fd, 65536))
    return b"".join(chunks).decode()


def test_live_line_ticks_every_second_on_a_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        assert live_capable(tty)
        progress = BenchProgress(1, stream=tty)
        progress(next(_events(2, 1)))
        out, deadline = "", time.monotonic() + 120  # a hang guard: ticks come each second
        while len(re.findall(r"elapsed (\d+) s", out)) < 3 and time.monotonic() < deadline:
            out += _drain(master)  # a run in progress: no event, yet the line must move
        progress.close()
        out += _drain(master)
    os.close(master)
    elapsed = re.findall(r"elapsed (\d+) s", out)
    assert len(elapsed) >= 3, out  # the first draw and at least two ticks
    assert elapsed[0] == "0" and int(elapsed[-1]) >= 2, elapsed
    assert out.endswith("\r\x1b[2K")  # the line is erased before the report


def test_term_dumb_and_pipes_get_plain_lines(monkeypatch):
    monkeypatch.setenv("TERM", "dumb")
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        assert not live_capable(tty)
    os.close(master)
    log = io.StringIO()
    progress = BenchProgress(1, stream=log)
    for event in _events(1, 1):
        progress(event)
    progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and all(line.startswith("jaxcache bench: ") for line in lines)
    assert "\x1b" not in log.getvalue() and "\r" not in log.getvalue()


def test_eta_waits_for_a_measured_warm_run_then_is_close():
    """On a clock the test moves (runs of fixed length, whatever this machine's speed)."""
    now = [1000.0]
    log = io.StringIO()
    progress = BenchProgress(1, stream=log, live=False, clock=lambda: now[0])
    durations = {"prime": 0.3, "cold": 0.3, "warm": 0.1}
    started = now[0]
    etas = []
    for event in _events(3, 1):
        progress(event)
        etas.append((now[0] - started, progress.eta_at))
        now[0] += durations[event.phase]
    progress.close()
    real_total = now[0] - started
    assert etas[0][1] is None and etas[1][1] is None  # no warm run measured yet
    assert etas[2][1] is None  # the first warm run is starting: still none measured
    at, (eta, _) = etas[3]  # trial 2's cold run: prime, cold and warm all measured
    assert abs((real_total - at) - eta) < 1e-9, (real_total - at, eta)  # exact: fixed runs
