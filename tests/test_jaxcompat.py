"""Loud failures when the JAX internals jaxcache relies on move."""

from __future__ import annotations

import inspect

import pytest

from jaxcache import jaxcompat

jax = pytest.importorskip("jax")


def test_pinned_version_is_a_tested_one():
    assert jax.__version__ in jaxcompat.TESTED, (
        f"JAX {jax.__version__} is not in jaxcompat.TESTED: re-verify every private name in "
        "jaxcache/jaxcompat.py and the probe's log messages, then add it")


def test_private_cache_state_names_exist():
    from jax._src import compilation_cache as cc

    for name in jaxcompat._STATE:
        assert hasattr(cc, name), f"jax._src.compilation_cache.{name} is gone"
    state = jaxcompat.cache_state()
    assert isinstance(state.compiled, bool) and isinstance(state.used, bool)


def test_reset_cache_resets_the_memoized_decision():
    from jax._src import compilation_cache as cc

    jax.jit(lambda x: x + 1)(jax.numpy.ones(2))
    assert jaxcompat.cache_state().compiled
    jaxcompat.reset_cache()
    assert not cc._cache_checked and not cc._cache_used and cc._cache is None


def test_messages_the_probe_parses_are_still_emitted():
    """The probe matches JAX's log format strings; they must still be in JAX's source."""
    from jax._src import cache_key, compilation_cache, compiler
    from jax._src.interpreters import pxla

    sources = "".join(inspect.getsource(m) for m in (compiler, compilation_cache, cache_key,
                                                     pxla))
    for fragment in (
        "Persistent compilation cache hit for '%s' with key %r",
        "PERSISTENT COMPILATION CACHE MISS for '%s' with key %r",
        "Not writing persistent cache entry since process_id != 0",
        "because it uses host ",
        "Not writing persistent cache entry for '%s' because it took < %.2f ",
        "'%s' took at least %.2f seconds to compile (%.2fs)",
        "since its size",
        "Writing %s to persistent compilation cache with key %r",
        "get_cache_key hash of serialized %s: %s",
        "Compiling %s with global shapes and types %s. ",
    ):
        assert fragment in sources, f"JAX no longer logs {fragment!r}: update the probe"


def test_monitoring_event_names_still_exist():
    from jax._src import compiler, dispatch

    src = inspect.getsource(compiler)
    for event in ("/jax/compilation_cache/compile_requests_use_cache",
                  "/jax/compilation_cache/cache_hits",
                  "/jax/compilation_cache/cache_retrieval_time_sec",
                  "/jax/compilation_cache/compile_time_saved_sec"):
        assert event in src
    assert dispatch.BACKEND_COMPILE_EVENT == "/jax/core/compile/backend_compile_duration"
    assert dispatch.JAXPR_TRACE_EVENT == "/jax/core/compile/jaxpr_trace_duration"


@pytest.mark.parametrize("version,ok", [("0.10.2", True), ("0.5.1", True), ("0.4.30", False),
                                        ("0.11.0", False), ("1.0.0", False)])
def test_version_gate(version, ok):
    if ok:
        jaxcompat.check_supported(version)
    else:
        with pytest.raises(jaxcompat.JaxInternalsChanged):
            jaxcompat.check_supported(version)
