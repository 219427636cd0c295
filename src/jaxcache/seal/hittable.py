"""Would a sealed reader ever hit this entry? Not if jaxlib <= 0.10 made it with XLA's
sub-caches on.

A sealed reader runs with `jax_persistent_cache_enable_xla_caches = none` (XLA would read its
sub-caches unsigned from inside the directory). On jaxlib <= 0.10 that setting is part of the
cache key: with the sub-caches on, the compile options carry the option
`xla_gpu_per_fusion_autotune_cache_dir` = <cache dir>/xla_gpu_per_fusion_autotune_cache_dir
(on CPU too), so such an entry's key is one a sealed reader never computes. The serialized
executable embeds its compile options, so the entry's decompressed bytes name that directory:
that is the test (FACTS.md sections 4 and 5; checked on jax 0.10.2, CPU, zlib). Signing such
an entry vouches for something nobody will load.

jaxlib 0.11 and later leave that option out of the key (seen on 0.12.0.1: the same key with
the sub-caches on and off, the bytes still naming the directory), so there the entry is hit.
An entry does not say which jaxlib made it: we take the jaxlib installed beside jaxcache (the
usual `pip install jaxcache[jax]`), and without one keep the older, stricter reading.
"""

from __future__ import annotations

import functools
import zlib

from jaxcache import jaxcompat
from jaxcache.jaxcompat import versions

MARKER = b"xla_gpu_per_fusion_autotune_cache_dir"
_CHUNK = 1 << 20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_chunks(data: bytes):
    """Decompressed pieces of a zstd entry, or None when no zstd decompressor is importable."""
    try:
        import zstandard  # type: ignore[import-not-found]
    except ImportError:
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python 3.14
        except ImportError:
            return None
        return iter([zstd.decompress(data)])
    reader = zstandard.ZstdDecompressor().stream_reader(data)
    return iter(lambda: reader.read(_CHUNK), b"")


def _zlib_chunks(data: bytes):
    """Decompressed pieces, a megabyte at a time: an entry can be large."""
    d = zlib.decompressobj()
    pending = data
    while pending:
        out = d.decompress(pending, _CHUNK)
        pending = d.unconsumed_tail
        if out:
            yield out
        if d.eof:
            return
    rest = d.flush()
    if rest:
        yield rest


def _subcache_path(window: bytes, at: int) -> str:
    """The sub-cache directory named around `at`: the printable run that ends with MARKER."""
    start = at
    while start > 0 and 0x20 < window[start - 1] < 0x7f:
        start -= 1
    run = window[start:at + len(MARKER)]
    if len(run) > 1 and run[0] == len(run) - 1:  # the protobuf length byte, when printable
        run = run[1:]
    return run.decode("ascii", "replace")


@functools.cache
def local_jaxlib() -> str | None:
    """The jaxlib installed where jaxcache runs (package metadata: JAX is not imported)."""
    return jaxcompat.installed_version("jaxlib")


def why_never_hit(data: bytes, jaxlib: str | None = None) -> str | None:
    """Why a sealed reader never hits the entry whose file holds `data`; None if it can.
    `jaxlib`: the one that made it (default: local_jaxlib()); from 0.11 it always can."""
    jaxlib = jaxlib or local_jaxlib()
    if versions.path_in_key(jaxlib) is False:
        return None
    if data.startswith(_ZSTD_MAGIC):
        chunks = _zstd_chunks(data)
        if chunks is None:
            return None  # cannot look inside: say nothing rather than guess
    else:
        chunks = _zlib_chunks(data)
    tail = b""
    try:
        for chunk in chunks:
            window = tail + chunk
            at = window.find(MARKER)
            if at >= 0:
                return (f"made with XLA's sub-caches on (its compile options name "
                        f"{_subcache_path(window, at)}); sealed readers run with them off, "
                        "so on jaxlib <= 0.10 they compute another key and never load it"
                        + (f" (jaxlib {jaxlib} here)" if jaxlib else
                           " (no jaxlib here to tell: if it came from jaxlib 0.11 or later, it "
                           "is hit; sign it with --allow-unhittable)"))
            tail = window[-(len(MARKER) + 4096):]
    except (zlib.error, ValueError, OSError):
        return None  # not an entry JAX could read either: its signature status says so
    except Exception as exc:  # zstandard.ZstdError is no subclass of the above
        if type(exc).__name__ == "ZstdError":
            return None
        raise
    return None
