"""This boot of this machine: the kernel's boot id.

The origin ledger keeps it with each line (under CI a line vouches only if written in this
boot: trust/provenance/ledger_file.py), and `jaxcache run` puts it in the fingerprint it hands a
job, which a process on another node or after a reboot then does not take (fingerprint.inherited()).
"""

from __future__ import annotations

_HEX = frozenset(b"0123456789abcdef")


def boot_id() -> str:
    """This machine's boot id (32 hex digits; the kernel draws it at random at every boot), or
    "" where /proc does not say. A disk image or volume snapshot reproduces a file to the byte,
    its device, inode and birth time included, but not a boot id no one could know in
    advance."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            raw = f.read(64).strip().replace(b"-", b"")
    except OSError:
        return ""
    return raw.decode() if len(raw) == 32 and _HEX.issuperset(raw) else ""
