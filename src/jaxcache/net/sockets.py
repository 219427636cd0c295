"""Live check: the listening sockets of JAX processes, as the kernel reports them (psutil)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from jaxcache.errors import JaxcacheError
from jaxcache.net.address import classify, reachable_from, split_host_port


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Scan:
    listeners: tuple[Listener, ...]
    processes: tuple[int, ...]  # JAX processes inspected
    uninspected: int  # processes we could not read (other users, not root)


def is_jax_process(pid: int) -> bool:
    """A process that has jaxlib mapped (it imported jax)."""
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
        return any("jaxlib" in line for line in f)


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


def _service(port: int, env: dict[str, str]) -> str:
    for var in ("JAX_COORDINATOR_BIND_ADDRESS", "JAX_COORDINATOR_ADDRESS"):
        if env.get(var) and split_host_port(env[var])[1] == port:
            return f"coordination service (port of {var})"
    if env.get("JAX_COORDINATOR_PORT") == str(port):
        return "coordination service (JAX_COORDINATOR_PORT)"
    return "listener of a JAX process (coordination service, profiler server or the program's)"


def inspect(pid: int, ifaces: dict[str, list[str]], *, jax_version_ok_for_mtls: bool
            ) -> list[Listener]:
    import psutil

    try:
        proc = psutil.Process(pid)
        name, user = proc.name(), proc.username()
        conns = proc.net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        raise JaxcacheError(f"no such process: {pid}") from None
    except psutil.AccessDenied:
        raise JaxcacheError(f"not permitted to inspect process {pid} (run as its user or "
                            "root)") from None
    env = _env(pid)
    mtls = jax_version_ok_for_mtls and all(env.get(v) for v in (
        "JAX_MTLS_CERT_FILE", "JAX_MTLS_KEY_FILE", "JAX_MTLS_CA_FILE"))
    out = []
    for c in conns:
        if c.status != psutil.CONN_LISTEN or not c.laddr:
            continue
        host, port = c.laddr.ip, c.laddr.port
        protocol = "tcp6" if ":" in host else "tcp"
        out.append(Listener(pid, name, user, host, port, protocol, classify(host),
                            tuple(reachable_from(host, ifaces)), _service(port, env), mtls))
    return out


def scan(pids: list[int] | None, *, jax_version_ok_for_mtls: bool) -> Scan:
    """Listeners of the given processes, or of every JAX process we can see."""
    from jaxcache.net.address import interfaces

    ifaces = interfaces()
    uninspected = 0
    if pids is None:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if is_jax_process(int(entry)):
                    pids.append(int(entry))
            except PermissionError:
                uninspected += 1
            except OSError:
                continue
    else:
        for pid in pids:
            if not os.path.isdir(f"/proc/{pid}"):
                raise JaxcacheError(f"no such process: {pid}")
    listeners = []
    for pid in pids:
        listeners += inspect(pid, ifaces, jax_version_ok_for_mtls=jax_version_ok_for_mtls)
    return Scan(tuple(listeners), tuple(pids), uninspected)
