"""What JAX says, and how, on each version jaxcache reads: messages, events, names.

The probe (probe/site.py) runs in the job's own Python, which may lack jaxcache and its
dependencies: it loads this file by path (launch.py puts a copy beside it). So: standard
library only, no imports from jaxcache, plain data and small pure functions.
Every difference here was seen on real JAX (tests/jaxcompat/test_jaxcompat.py and the matrix, `make
matrix`, fail when one moves).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import TypedDict

    # (kind, prefix of the text or None, fragments it must contain): MESSAGES, WARNINGS
    Kinds = Iterable[tuple[str, str | None, Iterable[str]]]

    class Knowledge(TypedDict):
        """knowledge(): plain data, as the probe holds it (it loads this file by path)."""

        version: str | None
        support: str
        events_name_module: bool
        compiling_name: str
        lambda_module: str
        entry_suffix: str
        messages: Kinds
        warnings: Kinds
        loggers: tuple[str, ...]
        events: dict[str, str]

# The newest patch of each minor line CI runs (`make matrix`); exactly these are tested.
# 0.11.2 and 0.12.0.1 need Python >= 3.12: the matrix runs them in a Debian 13 root.
TESTED = ("0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1")
OLDEST_LINE = (0, 5)  # 0.4.x: a dir set after a compile is ignored, hits log no key
NEWEST_LINE = (0, 12)
# The last line that never writes modules with host callbacks (jax.debug.print, breakpoint,
# io_callback) and logs "because it uses host callbacks"; 0.11 caches them like any module.
LAST_HOST_CALLBACKS_UNCACHED = (0, 10)
# The last JAX whose cache key holds the cache directory's path (the GPU autotune sub-cache
# option in the compile options, on every platform); 0.11's jax/_src/cache_key.py blanks it.
LAST_PATH_IN_KEY = (0, 10)

# JAX's debug log lines the probe reads: (kind, prefix of the format string or None,
# fragments it must contain). Same on every supported line, but for the kinds in UNTIL.
MESSAGES = (
    ("compiling", "Compiling %s with global shapes", ()),
    ("key-component", "get_cache_key hash of serialized", ()),
    ("hit", "Persistent compilation cache hit for", ()),
    ("miss", "PERSISTENT COMPILATION CACHE MISS for", ()),
    ("not-process-0", "Not writing persistent cache entry since process_id", ()),
    ("host-callbacks", None, ("because it uses host callbacks",)),
    ("below-compile-time", "Not writing persistent cache entry for '%s' because it took", ()),
    ("compile-time", "'%s' took at least", ()),
    ("below-entry-size", None, ("since its size", "less than threshold")),
    ("cache-disabled", None, ("since cache is disabled/not initialized",)),
    ("writing", "Writing %s to persistent compilation cache", ()),
    # jax_share_binary_between_hosts: a process other than the module's first waits in the
    # distributed key-value store for the executable that process compiles and publishes
    ("share-wait", "Waiting for module: %s from process", ()),
)
# Kinds JAX logs only up to a line (inclusive), as seen on the TESTED patches: the probe still
# reads them on any line (a patch that logs one is read right),
# tests/jaxcompat/test_jaxcompat.py checks each is in JAX's source exactly up to its line.
UNTIL = {"host-callbacks": LAST_HOST_CALLBACKS_UNCACHED}

# JAX's warnings (warnings.warn) about its cache the probe reads, same shape as MESSAGES but
# matched against the formatted text. Same on every supported line.
WARNINGS = (
    ("read-error", "Error reading persistent compilation cache entry for", ()),
    ("write-error", "Error writing persistent compilation cache entry for", ()),
    ("max-size", "Cache value for key", ("exceeds the maximum cache size",)),
)
# Any other warning naming this is kept as 'other' (the record shows it, nothing is inferred).
WARNING_TOPIC = "persistent compilation cache"

# The loggers those lines come from.
LOGGERS = ("jax._src.compiler", "jax._src.compilation_cache", "jax._src.cache_key",
           "jax._src.interpreters.pxla", "jax._src.lru_cache")

# Monitoring events (jax.monitoring) the probe listens to.
EVENTS = {
    "compile_requests": "/jax/compilation_cache/compile_requests_use_cache",
    "hits": "/jax/compilation_cache/cache_hits",
    "writes": "/jax/compilation_cache/cache_misses",  # fires right before a write only
    "tasks_using_cache": "/jax/compilation_cache/tasks_using_cache",
    "task_disabled_cache": "/jax/compilation_cache/task_disabled_cache",
    "trace": "/jax/core/compile/jaxpr_trace_duration",
    "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "compile": "/jax/core/compile/backend_compile_duration",
    "retrieval": "/jax/compilation_cache/cache_retrieval_time_sec",
    "saved": "/jax/compilation_cache/compile_time_saved_sec",
}


def parse(version: object) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); pre-release tags keep their digits ('0.5.0rc1' -> (0, 5, 0))."""
    parts: list[int] = []
    for piece in str(version).split(".")[:3]:
        digits = ""
        for c in piece:
            if not c.isdigit():
                break
            digits += c
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def support(version: str | None) -> str:
    """'tested' (in TESTED), 'supported' (another patch of a supported line), 'older',
    'newer' or 'unknown' (no version: the job never imported JAX, or it could not be read)."""
    if not version:
        return "unknown"
    if version in TESTED:
        return "tested"
    line = parse(version)[:2]
    if line < OLDEST_LINE:
        return "older"
    if line > NEWEST_LINE:
        return "newer"
    return "supported"


def why_unverified(version: str | None) -> str | None:
    """One line saying why jaxcache cannot vouch for what it reads from this JAX; None when it
    can."""
    kind = support(version)
    lines = "{}.{} to {}.{}".format(*OLDEST_LINE, *NEWEST_LINE)
    tested = ", ".join(TESTED)
    if kind in ("tested", "supported", "unknown"):
        return None
    if kind == "older":
        return (f"JAX {version} is older than the lines jaxcache reads correctly ({lines}; "
                f"tested {tested}): its messages and events differ, so the record may be wrong")
    return (f"JAX {version} is newer than the lines jaxcache was verified on ({lines}; tested "
            f"{tested}): its messages and events may have changed, so the record may be wrong")


def _line(version: object) -> tuple[int, ...]:
    return parse(version)[:2]


def _known(version: object) -> bool:
    return isinstance(version, str) and version[:1].isdigit()


def path_in_key(jax_version: object) -> bool | None:
    """Does this JAX's cache key hold the cache directory's path? True up to 0.10, False from
    0.11 (jax, not jaxlib, builds the key), None when the version is missing or no version."""
    if not _known(jax_version):
        return None
    return _line(jax_version) <= LAST_PATH_IN_KEY


# XLA's sub-caches that jax_persistent_cache_enable_xla_caches points inside the cache dir
# ('all', or a list of these; the default is the autotune one alone): each sets a compile
# option to a path in the cache dir, which the serialized executable keeps.
SUBCACHE_OPTIONS = ("xla_gpu_per_fusion_autotune_cache_dir", "xla_gpu_kernel_cache_file")


def subcache_options_in_key(jax_version: object) -> tuple[str, ...]:
    """The SUBCACHE_OPTIONS whose path enters this JAX's cache key: both up to 0.10 (and when
    the version is unknown); from 0.11 only the kernel cache file (cache_key.py blanks the
    autotune directory, seen on 0.11.2 and 0.12.0.1)."""
    if path_in_key(jax_version) is False:
        return SUBCACHE_OPTIONS[1:]
    return SUBCACHE_OPTIONS


def caches_host_callbacks(version: object) -> bool | None:
    """Does this JAX write modules with host callbacks? None when the version is unknown."""
    if not _known(version):
        return None
    return _line(version) > LAST_HOST_CALLBACKS_UNCACHED


def knowledge(version: str | None) -> Knowledge:
    """How this JAX names what it compiles, for the probe. Outside the supported lines, the
    nearest supported line's (and the record says it is unverified).

    events_name_module: duration events carry `fun_name` (0.6 added it; before, the module
      is the one the thread's log lines named last).
    compiling_name: the "Compiling %s" line names the bare function ('bare', up to 0.6)
      or 'jit(f)' ('jit', from 0.7); the module is jit_<f> either way.
    lambda_module: the module name of a jitted lambda.
    entry_suffix: how an entry file's name ends (<module>-<key hash><suffix>).
    messages: the MESSAGES the probe reads (all of them on every line: see UNTIL).
    """
    line = _line(version)
    line = max(OLDEST_LINE, min(NEWEST_LINE, line))
    return {
        "version": version,
        "support": support(version),
        "events_name_module": line >= (0, 6),
        "compiling_name": "bare" if line <= (0, 6) else "jit",
        "lambda_module": "jit__lambda_" if line <= (0, 6) else "jit__lambda",
        "entry_suffix": "-cache",
        "messages": MESSAGES,
        "warnings": WARNINGS,
        "loggers": LOGGERS,
        "events": dict(EVENTS),
    }


def _match(table: Kinds, text: str) -> str | None:
    for kind, prefix, fragments in table:
        if prefix is not None and not text.startswith(prefix):
            continue
        if all(f in text for f in fragments):
            return kind
    return None


def classify(knowledge: Knowledge, msg: str) -> str | None:
    """The kind of one of JAX's log format strings, or None when the probe ignores it."""
    return _match(knowledge["messages"], msg)


def classify_warning(knowledge: Knowledge, text: str) -> str | None:
    """The kind of a warning JAX gave about its cache ('other' when it is about the cache but
    of no known kind), or None when it is not about the cache."""
    kind = _match(knowledge["warnings"], text)
    if kind is None and WARNING_TOPIC in text:
        return "other"
    return kind
