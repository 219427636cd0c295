"""`jaxcache net --pid` on a process that is not JAX, and `net --live` run by a user who cannot
inspect every process: it fails closed (exit 1, naming whose processes) unless --partial."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.jobs import jaxcache
from support.users import as_user_argv, needs_root

pytest.importorskip("psutil")

LISTENER = ("import socket, sys, time\ns = socket.socket()\ns.bind(('0.0.0.0', 0))\ns.listen()\n"
            "print(s.getsockname()[1], flush=True)\nsys.stdin.read()\n")


def test_pid_of_a_listener_that_is_not_jax_is_refused():
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip().isdigit()  # listening on every interface now
        out = jaxcache("net", "--pid", str(proc.pid))
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.strip() == (f"jaxcache: process {proc.pid} is not a JAX process "
                                      "(jaxlib is not loaded in it): jaxcache net judges JAX's "
                                      "own services only")
        assert out.stdout == ""
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_partial_needs_live():
    out = jaxcache("net", "--partial")
    assert out.returncode == 2 and "--partial goes with --live" in out.stderr


@pytest.fixture
def others_process(accounts):
    """A process of user b, which user a cannot inspect."""
    acc = accounts
    proc = subprocess.Popen([*as_user_argv(acc.b), "sh", "-c", "echo up; exec cat"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    assert proc.stdout.readline().strip() == "up"
    try:
        yield acc, proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


@needs_root
def test_live_as_a_user_who_cannot_see_everything_fails_closed(others_process):
    acc, _pid = others_process
    out = jaxcache("net", "--live", "--format", "json", user=acc.a, cwd="/")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["unverifiable"] is True and doc["live"]["partial"] is False
    assert doc["live"]["uninspected_by_user"].get(acc.b, 0) >= 1
    [finding] = [f for f in doc["findings"] if f["code"] == "net.uninspected"]
    assert finding["effect"] == "unverifiable" and f"of {acc.b}" in finding["message"]
    text = jaxcache("net", "--live", user=acc.a, cwd="/")
    assert text.returncode == 1 and "UNVERIFIABLE" in text.stdout.splitlines()[0]
    assert "nothing reachable" not in text.stdout and "--partial" in text.stdout


@needs_root
def test_live_partial_says_it_is_partial(others_process):
    acc, _pid = others_process
    out = jaxcache("net", "--live", "--partial", "--format", "json", user=acc.a, cwd="/")
    doc = json.loads(out.stdout)
    assert out.returncode == (1 if doc["exposed"] else 0), out.stderr
    assert doc["unverifiable"] is False and doc["live"]["partial"] is True
    [finding] = [f for f in doc["findings"] if f["code"] == "net.partial"]
    assert finding["effect"] == "warning" and f"of {acc.b}" in finding["message"]
    text = jaxcache("net", "--live", "--partial", user=acc.a, cwd="/")
    assert "partial" in text.stdout.splitlines()[0] or doc["exposed"]


@needs_root
def test_root_inspects_other_users_processes(others_process):
    """Root reads every user's processes (a sandbox's own init may still refuse even root:
    then it is counted, never skipped)."""
    acc, _pid = others_process
    out = jaxcache("net", "--live", "--format", "json")
    doc = json.loads(out.stdout)
    assert out.returncode in (0, 1), out.stderr
    assert acc.b not in doc["live"]["uninspected_by_user"]
    assert doc["unverifiable"] is bool(doc["live"]["uninspected"])
