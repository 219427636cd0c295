"""Live check: the listening sockets of JAX processes, as the kernel reports them (psutil)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.net.address import classify, reachable_from, split_host_port
from jaxcache.net.launch_env import LaunchEnv


@dataclass(frozen=True, slots=True)
class Listener:
    pid: int
    process: str
    user: str
    address: str
    port: int
    protocol: str  # tcp | tcp6
    kind: str  # wildcard | loopback | specific
    reachable: tuple[str, ...]  # local interfaces that can reach it
    service: str  # what it is, as far as it can be told
    mtls: bool  # the process has JAX_MTLS_* set (and a JAX that honours them)


@dataclass(frozen=True, slots=True)
class Scan:
    listeners: tuple[Listener, ...]
    processes: tuple[int, ...]  # JAX processes inspected
    uninspected: int  # processes we could not read (other users, not root)
    uninspected_by_user: tuple[tuple[str, int], ...] = ()  # (user, how many), most first
    hidden: str | None = None  # /proc hides other users' processes (hidepid=...): why
    partial: bool = False  # the user accepted an answer that leaves those out

    @property
    def complete(self) -> bool:
        """Every process that could be a JAX process was looked at."""
        return not self.uninspected and self.hidden is None


def is_jax_process(pid: int) -> bool:
    """A process that has jaxlib mapped (it imported jax)."""
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
        return any("jaxlib" in line for line in f)


PF_KTHREAD = 0x00200000


def _kernel_thread(pid: int) -> bool:
    """Kernel threads (flags in /proc/PID/stat, readable by all) never run JAX."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return bool(int(fields[6]) & PF_KTHREAD)
    except (OSError, ValueError, IndexError):
        return False


def _owner(pid: int) -> str:
    import pwd

    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def proc_hides_processes() -> str | None:
    """Why other users' processes are invisible here (/proc mounted hidepid=2 / invisible or
    subset=pid for a non-root user), or None."""
    if os.geteuid() == 0:
        return None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return "cannot read /proc/self/mountinfo to see how /proc is mounted"
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) > 4 and parts[4] == "/proc" and rparts[:1] == ["proc"]:
            options = rparts[2].split(",") if len(rparts) > 2 else []
            for opt in options:
                if opt in ("hidepid=2", "hidepid=invisible"):
                    return f"/proc is mounted with {opt}: other users' processes are hidden"
    return None


def _pid_is_jax(pid: int) -> None:
    """--pid P: P must exist, be readable and be a JAX process; otherwise one clear line."""
    try:
        jax = is_jax_process(pid)
    except (FileNotFoundError, ProcessLookupError):
        raise JaxcacheError(f"no such process: {pid}") from None
    except PermissionError:
        raise JaxcacheError(f"not permitted to inspect process {pid} (user {_owner(pid)}): run "
                            "as its user or root") from None
    except OSError as exc:
        raise JaxcacheError(f"cannot inspect process {pid}: {exc.strerror}") from None
    if not jax:
        raise JaxcacheError(f"process {pid} is not a JAX process (jaxlib is not loaded in it): "
                            "jaxcache net judges JAX's own services only")


def _env(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    out = {}
    for item in items:
        key, sep, value = item.partition(b"=")
        if sep:
            out[os.fsdecode(key)] = os.fsdecode(value)
    return out


def _service(port: int, env: LaunchEnv) -> str:
    for var, address in (("JAX_COORDINATOR_BIND_ADDRESS", env.bind_address),
                         ("JAX_COORDINATOR_ADDRESS", env.coordinator_address)):
        if address and split_host_port(address)[1] == port:
            return f"coordination service (port of {var})"
    if env.coordinator_port == str(port):
        return "coordination service (JAX_COORDINATOR_PORT)"
    from jaxcache.net.config import coordinator_of

    # the port JAX works out from the launcher's variables
    source, _, derived = coordinator_of(env)
    if source is not None and derived == port:
        return f"coordination service (port JAX derives from the {source} environment)"
    return "listener of a JAX process (coordination service, profiler server or the program's)"


class _Gone(JaxcacheError):
    """The process ended before we could look at it."""


class _Denied(JaxcacheError):
    """Not permitted to look at the process."""


def inspect(pid: int, ifaces: dict[str, list[str]], *, jax_version_ok_for_mtls: bool
            ) -> list[Listener]:
    import psutil

    try:
        proc = psutil.Process(pid)
        name, user = proc.name(), proc.username()
        conns = proc.net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        raise _Gone(f"no such process: {pid}") from None
    except psutil.AccessDenied:
        raise _Denied(f"not permitted to inspect process {pid} (run as its user or "
                      "root)") from None
    env = LaunchEnv.from_environ(_env(pid))
    mtls = jax_version_ok_for_mtls and env.mtls_files
    out = []
    for c in conns:
        if c.status != psutil.CONN_LISTEN or not c.laddr:
            continue
        host, port = c.laddr.ip, c.laddr.port
        protocol = "tcp6" if ":" in host else "tcp"
        out.append(Listener(pid, name, user, host, port, protocol, classify(host),
                            tuple(reachable_from(host, ifaces)), _service(port, env), mtls))
    return out


def scan(pids: list[int] | None, *, jax_version_ok_for_mtls: bool, partial: bool = False
         ) -> Scan:
    """Listeners of the given processes, or of every JAX process we can see. Processes we
    cannot look into are counted per user: the caller fails closed on them unless `partial`."""
    from collections import Counter

    from jaxcache.net.address import interfaces

    ifaces = interfaces()
    denied: Counter[str] = Counter()
    hidden = None
    live = pids is None
    if pids is None:
        pids = []
        hidden = proc_hides_processes()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if is_jax_process(int(entry)):
                    pids.append(int(entry))
            except PermissionError:
                if not _kernel_thread(int(entry)):
                    denied[_owner(int(entry))] += 1
            except OSError:
                continue  # gone meanwhile
    else:
        for pid in pids:
            if not os.path.isdir(f"/proc/{pid}"):
                raise JaxcacheError(f"no such process: {pid}")
            _pid_is_jax(pid)
    listeners, seen = [], []
    for pid in pids:
        try:
            listeners += inspect(pid, ifaces, jax_version_ok_for_mtls=jax_version_ok_for_mtls)
        except _Gone:
            if not live:
                raise
            continue
        except _Denied:
            if not live:
                raise
            denied[_owner(pid)] += 1
            continue
        seen.append(pid)
    by_user = tuple(sorted(denied.items(), key=lambda kv: (-kv[1], kv[0])))
    return Scan(tuple(listeners), tuple(seen), sum(denied.values()), by_user, hidden, partial)
