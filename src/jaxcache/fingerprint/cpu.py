"""The host's CPU: architecture, model and the instruction-set features compiled code may use.

XLA compiles CPU code for the host's target machine (its features: AVX-512, AMX, SVE...). An
entry compiled where a feature exists and loaded where it does not can die of SIGILL or take
another code path, and XLA's loader only logs it (JAX issue 38445, XLA issue 44565). The kernel
lists the features in /proc/cpuinfo (`flags` on x86, `Features` on Arm); a few of those words
are not instructions at all but facts about the machine or the kernel (a hypervisor, a steady
clock): they are left out (NOT_INSTRUCTIONS), so that a VM and bare metal of one CPU compare
equal. Everything else counts: a word we do not know is kept, since leaving out a real
instruction set could let an entry load where it cannot run (fail closed: a needless miss at
worst).

Only the first processor's block is read (the kernel builds the file per CPU as it is read, so
a 128-core host costs no more than a 2-core one); a host whose cores differ in features
(big.LITTLE) is judged by its first.
"""

from __future__ import annotations

import os

from jaxcache.fingerprint.cpuinfo import NOT_INSTRUCTIONS, parse
from jaxcache.fingerprint.model import Cpu

__all__ = ["CPUINFO", "NOT_INSTRUCTIONS", "machine", "parse", "read"]

CPUINFO = "/proc/cpuinfo"
_MAX = 64 << 10


def read(path: str = CPUINFO) -> Cpu:
    """The first processor's vendor, model and instruction features ("" and none where the
    file is missing or unreadable: the rule then compares nothing it does not know)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return Cpu()
    text = b""
    try:
        while b"\n\n" not in text and len(text) < _MAX:
            chunk = os.read(fd, 8192)
            if not chunk:
                break
            text += chunk
    except OSError:
        return Cpu()
    finally:
        os.close(fd)
    return parse(text.split(b"\n\n", 1)[0].decode("utf-8", "replace"))


def machine() -> str:
    """The architecture (uname -m): an entry never loads on another."""
    return os.uname().machine  # what platform.machine() reads, without importing platform
