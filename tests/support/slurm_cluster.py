"""A real single-node Slurm cluster for the tests (Debian slurm-wlm + munge), on loopback.

Everything lives under one private temp directory: the munge key and socket, slurm.conf,
state, spool, logs and pid files. The daemons run in the foreground as our children and are
stopped by PID; nothing under /etc, /run or /var is touched. Clients find the cluster through
the SLURM_CONF this object's `env()` returns.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "squeue", "scancel", "sinfo")


def missing() -> list[str]:
    """The Slurm and munge programs not installed here (scripts/system-deps.sh installs them)."""
    return [name for name in DAEMONS if shutil.which(name) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """\
ClusterName=jaxcache-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
StateSaveLocation={top}/state
SlurmdSpoolDir={top}/spool
SlurmctldPidFile={top}/slurmctld.pid
SlurmdPidFile={top}/slurmd.pid
SlurmctldLogFile={top}/slurmctld.log
SlurmdLogFile={top}/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class SlurmCluster:
    """Start with `start()`, stop with `stop()` (also after a failed start)."""

    def __init__(self, cpus: int | None = None) -> None:
        self.top = Path(tempfile.mkdtemp(prefix="jaxcache-slurm-"))
        self.top.chmod(0o755)  # slurmd's job steps (as the submitting user) reach the conf
        self.cpus = cpus or max(2, os.cpu_count() or 2)
        self.conf = self.top / "slurm.conf"
        self.socket = self.top / "munge" / "munge.socket"
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self, base: dict | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        for k in [k for k in env if k.startswith("SLURM_")]:
            del env[k]  # an outer allocation must not leak into the test's commands
        env["SLURM_CONF"] = str(self.conf)
        return env

    def start(self, timeout: float = 30.0) -> None:
        for sub in ("munge", "state", "spool"):
            (self.top / sub).mkdir(mode=0o700)
        (self.top / "munge").chmod(0o755)  # clients of any user reach the socket
        key = self.top / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(CONF.format(ctld_port=_free_port(), d_port=_free_port(),
                                         socket=self.socket, top=self.top, cpus=self.cpus))
        self.conf.chmod(0o644)
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={self.socket}",
                               f"--key-file={key}", f"--pid-file={self.top}/munged.pid",
                               f"--log-file={self.top}/munged.log",
                               f"--seed-file={self.top}/munged.seed"])
        self._wait(lambda: self.socket.exists(), timeout, "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", "localhost"])
        self._wait(self._node_idle, timeout, "the node to become idle")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.top / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _node_idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env(),
                             capture_output=True, text=True, timeout=10)
        return out.returncode == 0 and out.stdout.strip().startswith("idle")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}): {self.log(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}: {self.log('slurmctld')}")

    def log(self, name: str) -> str:
        texts = []
        for suffix in (".out", ".log"):
            path = self.top / f"{name}{suffix}"
            if path.exists():
                texts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(texts)

    def jobs(self) -> list[str]:
        """Job ids squeue still lists (pending, running, completing)."""
        out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=self.env(),
                             capture_output=True, text=True, timeout=10)
        return [line for line in out.stdout.splitlines() if line.strip()]

    def drained(self, timeout: float = 30.0) -> list[str]:
        """Wait until squeue lists no job (a finished one is COMPLETING for a moment);
        returns what is still listed at the deadline."""
        deadline = time.monotonic() + timeout
        while (left := self.jobs()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def leftovers(self) -> list[int]:
        """Processes of this cluster outside our daemons: job step daemons (slurmstepd
        outlives slurmd) and their tasks, known by the SLURM_CONF in their environment."""
        mark = f"SLURM_CONF={self.conf}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        """Cancel every job, stop the daemons, then kill whatever of the cluster is left."""
        if "slurmctld" in self.procs:
            for line in self.jobs():
                subprocess.run(["scancel", line.split()[0]], env=self.env(),
                               capture_output=True, timeout=10)
            self.drained(10)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in self.leftovers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.top, ignore_errors=True)
