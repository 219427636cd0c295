"""Origin ledgers as the witness makes them, and a directory judged by one
(trust/provenance/origin.py)."""

from __future__ import annotations

import os
from pathlib import Path

from jaxcache.trust.inputs import ledger as ledger_mod
from jaxcache.trust.provenance import birth, ledger_file, origin

# a watched job that compiles two modules (jit_f, jit_h), and what it prints
TWO_JITS_JOB = """
import numpy as np, jax
def f(x): return x * 2 + 1
def h(x): return x - 3
x = np.arange(4, dtype=np.float32)
print("A", jax.jit(f)(x).tolist(), jax.jit(h)(x).tolist())
"""
TWO_JITS_OUTPUT = "A [1.0, 3.0, 5.0, 7.0] [-3.0, -2.0, -1.0, 0.0]\n"
# every compile is written (the tests are about origin, not thresholds), with XLA's sub-caches
# off as a sealed reader has them, so the sealed entries are the ones a sealed run asks for
EVERY_COMPILE = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
                 "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": "none"}


def bound_ledger(path: Path, body: bytes, header_extra: bytes = b"") -> None:
    """A ledger 0600 whose header names the file itself (its device, inode and birth time, as
    the witness writes it), optionally with `header_extra` after the birth time, then `body`."""
    path.write_bytes(b"")
    path.chmod(0o600)
    st = path.stat()
    head = ledger_file.header(st.st_dev, st.st_ino, birth.of_path(str(path)))
    path.write_bytes(head.rstrip(b"\n") + header_extra + b"\n" + body)  # the same inode


def judged(directory: Path, ledger: Path) -> origin.Origins:
    """The origin of every entry of `directory` by the ledger at `ledger`, as the audit judges."""
    from jaxcache.trust.kernel import entries

    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inv = entries.inventory(fd, str(directory), frozenset({0, os.geteuid()}),
                                entries.Accounts())
        return origin.judge(inv, fd, ledger_mod.load(str(ledger)), str(directory))
    finally:
        os.close(fd)
