"""The content digest a signature covers: BLAKE3-256 of the exact bytes.

Why BLAKE3 and not SHA-256: verification sits on the load path of every warm start, so the
hash must cost little next to JAX's own read, decompression and deserialization. Measured on
this project's 2-core machine (AVX-512, SHA extensions): 100 MB in 22 ms with BLAKE3 against
58 ms with hashlib's SHA-256 (a SHA-256 tree over chunks on both cores was tried too; memory
bandwidth kept it near 45 ms). The standard library's BLAKE2b, which would drop the dependency,
is 2.3-3.4x slower than BLAKE3 from 100 KB to 100 MB (benchmarks/digest_speed.py,
docs/explanation/benchmarks.md), so the format jaxcache.seal/1 keeps BLAKE3. BLAKE3 is a 256-bit
cryptographic hash (128-bit collision resistance), which is what a signature over a digest needs.
"""

from __future__ import annotations

NAME = "blake3"
_THREADED_FROM = 8 << 20  # below this, starting BLAKE3's worker threads costs more than it saves


def of(data: bytes | bytearray | memoryview) -> bytes:
    """The digest of bytes in memory: what is signed, and what is checked before JAX gets
    the very same object."""
    import blake3

    if len(data) >= _THREADED_FROM:
        return blake3.blake3(data, max_threads=blake3.blake3.AUTO).digest()
    return blake3.blake3(data).digest()
