"""Would a sealed reader ever hit this entry? Not if it was made with an XLA sub-cache on
whose path enters the key.

A sealed reader runs with `jax_persistent_cache_enable_xla_caches = none` (XLA would read its
sub-caches unsigned from inside the directory). A job run with them on sets compile options to
paths inside the cache dir (`xla_gpu_per_fusion_autotune_cache_dir` by default,
`xla_gpu_kernel_cache_file` too with 'all'; on CPU too), and the serialized executable embeds
its compile options, so the entry's decompressed bytes name them: that is the test (FACTS.md
sections 4 and 5). Where such an option is part of the key, the entry's key is one a sealed
reader never computes, and signing it vouches for something nobody will load:
- up to JAX 0.10 both options enter the key (checked on 0.10.2, CPU, zlib);
- from 0.11, jax/_src/cache_key.py blanks the autotune directory before hashing, so an entry
  made with the default setting is hit; the kernel cache file still enters the key (seen on
  0.12.0.1: same key with the default and with 'none', another with 'all').
An entry does not say which JAX made it: we take the JAX installed beside jaxcache (the usual
`pip install jaxcache[jax]`), and without one keep the stricter, older reading
(versions.subcache_options_in_key).
"""

from __future__ import annotations

import functools
import zlib

from jaxcache import jaxcompat
from jaxcache.jaxcompat import versions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

_LONGEST = max(len(o) for o in versions.SUBCACHE_OPTIONS)
_CHUNK = 1 << 20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_chunks(data: bytes) -> Iterator[bytes] | None:
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


def _zlib_chunks(data: bytes) -> Iterator[bytes]:
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


def _subcache_path(window: bytes, at: int, marker: bytes) -> str:
    """The sub-cache path named around `at`: the printable run that ends with `marker`."""
    start = at
    while start > 0 and 0x20 < window[start - 1] < 0x7f:
        start -= 1
    run = window[start:at + len(marker)]
    if len(run) > 1 and run[0] == len(run) - 1:  # the protobuf length byte, when printable
        run = run[1:]
    return run.decode("ascii", "replace")


@functools.cache
def local_jax() -> str | None:
    """The JAX installed where jaxcache runs (package metadata: JAX is not imported)."""
    return jaxcompat.installed_version("jax")


def why_never_hit(data: bytes, jax: str | None = None) -> str | None:
    """Why a sealed reader never hits the entry whose file holds `data`; None if it can.
    `jax`: the JAX that made it (default: local_jax())."""
    jax = jax or local_jax()
    markers = tuple(o.encode() for o in versions.subcache_options_in_key(jax))
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
            for marker in markers:
                at = window.find(marker)
                if at >= 0:
                    return (f"made with XLA's sub-caches on (its compile options name "
                            f"{_subcache_path(window, at, marker)}, which is part of the key "
                            + (f"on JAX {jax}" if jax else "up to JAX 0.10; no JAX here to "
                               "tell which made it") + "); sealed readers run with them off, "
                            "so they compute another key and never load it")
            tail = window[-(_LONGEST + 4096):]
    except (zlib.error, ValueError, OSError):
        return None  # not an entry JAX could read either: its signature status says so
    except Exception as exc:  # zstandard.ZstdError is no subclass of the above
        if type(exc).__name__ == "ZstdError":
            return None
        raise
    return None
