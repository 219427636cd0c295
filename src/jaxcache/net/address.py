"""Listening addresses: wildcard, loopback or one interface, and who can reach them."""

from __future__ import annotations

import ipaddress


def split_host_port(text: str) -> tuple[str, int | None]:
    """'[::]:1234' -> ('::', 1234); 'host:80' -> ('host', 80); 'host' -> ('host', None)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    return host, int(port) if port.isdigit() else None


def classify(host: str) -> str:
    if host in ("", "*", "0.0.0.0", "::", "[::]"):  # noqa: S104 - recognising, not binding
        return "wildcard"
    if host == "localhost":
        return "loopback"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "specific"  # a host name: whatever it resolves to on that host
    mapped = getattr(ip, "ipv4_mapped", None)
    if ip.is_loopback or (mapped is not None and mapped.is_loopback):
        return "loopback"
    if ip.is_unspecified:
        return "wildcard"
    return "specific"


def interfaces() -> dict[str, list[str]]:
    """Local interface names and their addresses (psutil)."""
    import socket

    import psutil

    out: dict[str, list[str]] = {}
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                out.setdefault(name, []).append(a.address.split("%")[0])
    return out


def reachable_from(host: str, ifaces: dict[str, list[str]]) -> list[str]:
    """Which local interfaces can reach a listener bound to `host`."""
    kind = classify(host)
    if kind == "wildcard":
        return sorted(ifaces)
    if kind == "loopback":
        return [n for n, addrs in ifaces.items() if any(classify(a) == "loopback" for a in addrs)]
    return [n for n, addrs in ifaces.items() if host in addrs]
