"""Loud failures when the JAX internals jaxcache relies on move."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import pytest

from jaxcache import jaxcompat

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.matrix  # `make matrix` runs this file on every supported JAX line


def test_every_name_resolves_lazily_to_its_module():
    """The package's names are imported when first asked for (jaxcompat/__init__.py): each
    must come from the module the table names, and importing versions.py alone (what `run`
    needs before a job starts) must not import the modules that touch JAX's internals."""
    import importlib
    import subprocess
    import sys

    for name in jaxcompat.__all__:
        if name == "RefusedCache":
            continue
        module = importlib.import_module(f"jaxcache.jaxcompat.{jaxcompat._HOME[name]}")
        assert getattr(jaxcompat, name) is getattr(module, name), name
    with pytest.raises(AttributeError):
        _ = jaxcompat.no_such_name
    out = subprocess.run([sys.executable, "-c", "import sys, jaxcache.jaxcompat.versions; "
                          "print(sorted(m for m in sys.modules if 'jaxcompat' in m))"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['jaxcache.jaxcompat', 'jaxcache.jaxcompat.versions']"


def test_pinned_version_is_a_tested_one():
    assert jax.__version__ in jaxcompat.TESTED, (
        f"JAX {jax.__version__} is not in jaxcompat.TESTED: re-verify every private name in "
        "jaxcache/jaxcompat.py and the probe's log messages, then add it")


def test_private_cache_state_names_exist():
    from jax._src import compilation_cache as cc

    for name in jaxcompat.STATE:
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

    from jaxcache.jaxcompat import versions

    sources = "".join(inspect.getsource(m) for m in (compiler, compilation_cache, cache_key,
                                                     pxla))
    host_callbacks = "because it uses host "
    assert (host_callbacks in sources) == (not versions.caches_host_callbacks(jax.__version__)), (
        f"JAX {jax.__version__}: the host-callbacks message is "
        f"{'still' if host_callbacks in sources else 'no longer'} logged: update versions.UNTIL")
    for fragment in (
        "Persistent compilation cache hit for '%s' with key %r",
        "PERSISTENT COMPILATION CACHE MISS for '%s' with key %r",
        "Not writing persistent cache entry since process_id != 0",
        "Not writing persistent cache entry for '%s' because it took < %.2f ",
        "'%s' took at least %.2f seconds to compile (%.2fs)",
        "since its size",
        "Writing %s to persistent compilation cache with key %r",
        "get_cache_key hash of serialized %s: %s",
        "Compiling %s with global shapes and types %s. ",
        "Waiting for module: %s from process %d",
    ):
        assert fragment in sources, f"JAX no longer logs {fragment!r}: update the probe"


def test_the_cache_path_enters_the_key_exactly_where_versions_says():
    """JAX 0.11's cache_key.py blanks the GPU autotune sub-cache path before hashing the
    compile options; up to 0.10 it does not, and the directory's path is in every key."""
    from jax._src import cache_key

    from jaxcache.jaxcompat import versions

    blanked = 'xla_gpu_per_fusion_autotune_cache_dir = ""' in inspect.getsource(cache_key)
    assert blanked == (not versions.path_in_key(jax.__version__)), (
        f"JAX {jax.__version__} {'blanks' if blanked else 'keeps'} the cache path in the key: "
        "update versions.LAST_PATH_IN_KEY")


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
                                        ("0.11.0", True), ("0.12.0.1", True), ("0.12.1", True),
                                        ("0.13.0", False), ("1.0.0", False)])
def test_version_gate(version, ok):
    if ok:
        jaxcompat.check_supported(version)
    else:
        with pytest.raises(jaxcompat.JaxInternalsChanged):
            jaxcompat.check_supported(version)


class _Recorder:
    """A minimal CacheInterface: records what JAX asks for, stores in memory."""

    def __init__(self, path: str = "") -> None:
        self._path = path  # JAX's reset_cache() logs it
        self.gets: list[str] = []
        self.puts: dict[str, bytes] = {}

    def get(self, key):
        self.gets.append(key)
        return self.puts.get(key)

    def put(self, key, value):
        self.puts[key] = value


def _subprocess_check(code: str) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_installed_backend_sees_every_get_and_put_with_the_full_key(tmp_path):
    """The sealed cache rests on this: JAX's factory is what creates its cache object, and
    every lookup and write goes through the object with the whole key."""
    here = str(Path(__file__).parent)
    _subprocess_check(f"""
import sys
sys.path.insert(0, {here!r})
import jax, jax.numpy as jnp
from jaxcache import jaxcompat
import test_jaxcompat as t
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
rec = t._Recorder()
jaxcompat.install_backend({str(tmp_path)!r}, rec)
assert jaxcompat.uses_backend(rec)
jax.jit(lambda x: x * 3)(jnp.ones(3))
assert rec.gets and set(rec.puts) <= set(rec.gets), (rec.gets, list(rec.puts))
lam = jaxcompat.versions.knowledge(jax.__version__)["lambda_module"]  # jit__lambda_ <= 0.6
(key,) = [k for k in rec.puts if k.startswith(lam + "-")]
assert len(key.split("-")[-1]) == 64, key
jaxcompat.reset_cache()                       # a reset re-initializes through the factory
jax.clear_caches()
jax.jit(lambda x: x * 3)(jnp.ones(3))
assert jaxcompat.uses_backend(rec), "after reset_cache JAX did not come back to the backend"
""")


def test_the_factory_hands_jax_what_its_own_get_file_cache_would(tmp_path):
    """JAX's own test_get_file_cache, on the sealed backend and the guard: with
    jax_compilation_cache_check_contents on, get_file_cache(path) is (JAX's VerificationCache
    around the store, path), and JAX's own class then verifies; a refused directory's
    object is a CacheInterface too, that never hits and never writes."""
    here = str(Path(__file__).parent)
    sealed, refused = tmp_path / "sealed", tmp_path / "refused"
    sealed.mkdir(mode=0o700)
    refused.mkdir(mode=0o700)
    _subprocess_check(f"""
import sys
sys.path.insert(0, {here!r})
import jax, jax.numpy as jnp
from jax._src import compilation_cache as cc
from jax._src.compilation_cache_interface import CacheInterface
from jaxcache import jaxcompat
import test_jaxcompat as t
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
rec = t._Recorder()
jaxcompat.install_backend({str(sealed)!r}, rec)
has_check = hasattr(cc, "VerificationCache") and hasattr(jax.config,
                                                          "jax_compilation_cache_check_contents")
if has_check:
    jax.config.update("jax_compilation_cache_check_contents", True)
    cache, path = cc.get_file_cache({str(sealed)!r})
    assert isinstance(cache, cc.VerificationCache) and path == {str(sealed)!r}, (cache, path)
    assert cache._path == {str(sealed)!r}
    jaxcompat.reset_cache()
    jax.clear_caches()
    jax.jit(lambda x: x * 5)(jnp.ones(3)).block_until_ready()
    assert isinstance(cc._cache, cc.VerificationCache) and jaxcompat.uses_backend(rec)
    assert rec.puts and not cc._cache._base_cache._verifier  # JAX's class verifies, once
    assert jaxcompat.uses_sealed({str(sealed)!r})
    jax.config.update("jax_compilation_cache_check_contents", False)
cache, path = cc.get_file_cache({str(sealed)!r})
assert isinstance(cache, CacheInterface) and path == {str(sealed)!r}
assert not isinstance(cache, getattr(cc, "VerificationCache", ()))
jaxcompat.guard_cache_dirs([])
cache, path = cc.get_file_cache({str(refused)!r})
assert isinstance(cache, CacheInterface) and isinstance(cache, jaxcompat.RefusedCache)
assert path == {str(refused)!r} and cache._path == {str(refused)!r}
cache.put("k", b"v")
assert cache.get("k") is None
print("checked" if has_check else "no check_contents on this JAX")
""")


def test_install_fails_closed_when_jax_ignores_the_factory(tmp_path):
    """If JAX stops building its cache through get_file_cache, enabling must leave no cache."""
    _subprocess_check(f"""
import jax
from jax._src import compilation_cache as cc
from jaxcache import jaxcompat
cc._initialize_cache = lambda: None           # a JAX whose initialization changed
try:
    class Backend:
        _path = ""
        def get(self, key): return None
        def put(self, key, value): pass
    jaxcompat.install_backend({str(tmp_path)!r}, Backend())
except jaxcompat.JaxInternalsChanged as exc:
    assert "OFF for this process" in str(exc)
else:
    raise SystemExit("installed without checking")
assert jax.config.jax_compilation_cache_dir is None and cc._cache is None
""")


def test_guard_serves_admitted_directories_and_refuses_any_other(tmp_path):
    """The guard under enable() and `jaxcache run`: JAX's own factory is replaced, so a
    directory the job points JAX at itself gets a cache that never hits and never writes;
    an alias through a symlink is another path; an auditor may admit one on the spot."""
    ok, other, judged = tmp_path / "ok", tmp_path / "other", tmp_path / "judged"
    for d in (ok, other, judged):
        d.mkdir(mode=0o700)
    (tmp_path / "alias").symlink_to(ok)
    _subprocess_check(f"""
import os, jax, jax.numpy as jnp
from jax._src import compilation_cache as cc
from jaxcache import jaxcompat
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jaxcompat.guard_cache_dirs([{str(ok)!r}])

def compile_in(path, n):
    jaxcompat.reset_cache()
    jax.clear_caches()
    jax.config.update("jax_compilation_cache_dir", path)
    jax.jit(lambda x: x * n)(jnp.ones(3)).block_until_ready()
    return jaxcompat.current_cache()

for path in ({str(other)!r}, {str(tmp_path / 'alias')!r}):
    now = compile_in(path, 3)
    assert isinstance(cc._cache, jaxcompat.RefusedCache) and now["status"] == "refused", now
assert os.listdir({str(other)!r}) == [] and os.listdir({str(ok)!r}) == []
now = compile_in({str(ok)!r}, 3)
assert now["status"] == "served" and now["how"] == "audited", now
assert any(n.endswith("-cache") for n in os.listdir({str(ok)!r}))
asked = []
jaxcompat.guard_cache_dirs(auditor=lambda p: (asked.append(p) or True, "fine"))
now = compile_in({str(judged)!r}, 4)
assert asked == [{str(judged)!r}] and now["how"] == "audited-in-process", now
assert [(e["path"], e["status"]) for e in jaxcompat.guard_log()] == [
    ({str(other)!r}, "refused"), ({str(tmp_path / 'alias')!r}, "refused"),
    ({str(ok)!r}, "served"), ({str(judged)!r}, "served")], jaxcompat.guard_log()
""")


def test_the_witness_sees_each_entry_jax_writes_with_its_exact_bytes(tmp_path):
    """The origin ledger rests on this: after a put JAX makes in an admitted directory, the
    witness gets (directory, key, value), and <dir>/<key>-cache holds exactly `value`
    (guard.ENTRY_SUFFIX); a put onto an existing file (LRUCache never replaces one) is not
    reported."""
    ok = tmp_path / "ok"
    ok.mkdir(mode=0o700)
    _subprocess_check(f"""
import os, jax, jax.numpy as jnp
from jaxcache import jaxcompat
from jaxcache.jaxcompat.guard import ENTRY_SUFFIX
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
seen = []
jaxcompat.guard_cache_dirs([{str(ok)!r}])
jaxcompat.witness_puts(lambda d, k, v: seen.append((d, k, bytes(v))))
jax.config.update("jax_compilation_cache_dir", {str(ok)!r})
jax.jit(lambda x: x * 7)(jnp.ones(3)).block_until_ready()
files = sorted(n for n in os.listdir({str(ok)!r}) if n.endswith(ENTRY_SUFFIX))
assert files and sorted(k + ENTRY_SUFFIX for _, k, _ in seen) == files, (files, seen)
for d, k, v in seen:
    assert d == {str(ok)!r}
    with open(os.path.join(d, k + ENTRY_SUFFIX), "rb") as f:
        assert f.read() == v
cache = jaxcompat.current_cache()
assert cache["status"] == "served", cache
from jax._src import compilation_cache as cc
before = len(seen)
cc._cache.put(seen[0][1], b"other bytes")  # the file exists: JAX keeps it, no new origin
assert len(seen) == before
""")


def test_guard_fails_closed_when_jax_stops_calling_the_factory():
    """If _initialize_cache no longer builds its cache through get_file_cache, the guard
    would guard nothing: it refuses to install, and the caller turns the cache off."""
    from jax._src import compilation_cache as cc

    assert "get_file_cache" in cc._initialize_cache.__code__.co_names
    _subprocess_check("""
from jax._src import compilation_cache as cc
from jaxcache import jaxcompat
cc._initialize_cache = lambda: None
try:
    jaxcompat.guard_cache_dirs(["/nonexistent"])
except jaxcompat.JaxInternalsChanged as exc:
    assert "no longer calls get_file_cache" in str(exc)
else:
    raise SystemExit("guard installed on a JAX that would not use it")
""")


def test_redirecting_jax_turns_xla_subcaches_off(tmp_path):
    """JAX points XLA's GPU autotune cache inside jax_compilation_cache_dir at every compile,
    whatever cache object it holds: setting a directory the guard refuses (globally or in a
    context manager) must leave XLA no path into it."""
    ok, other = tmp_path / "ok", tmp_path / "other"
    _subprocess_check(f"""
import jax
from jax._src import compiler
from jaxcache import jaxcompat

def autotune_dir():
    o = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return o.executable_build_options.debug_options.xla_gpu_per_fusion_autotune_cache_dir

jax.config.update("jax_compilation_cache_dir", {str(ok)!r})
jaxcompat.guard_cache_dirs([{str(ok)!r}])
assert autotune_dir() == {str(ok / "xla_gpu_per_fusion_autotune_cache_dir")!r}, autotune_dir()
from jax._src import config as jax_config
with jax_config.compilation_cache_dir({str(other)!r}):  # the thread-local setting
    assert autotune_dir() == "", autotune_dir()
jax.config.update("jax_compilation_cache_dir", {str(other)!r})
assert autotune_dir() == "" and jax.config.jax_persistent_cache_enable_xla_caches == "none"
""")


def _what_jax_says() -> dict:
    """Compile a named jit and a lambda in a fresh process with a cache, and report the
    duration events' kwargs, the 'Compiling' and cache lines JAX logs, and the entry files."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    code = """
import json, logging, os, sys
lines = []
class H(logging.Handler):
    def emit(self, r):
        lines.append([r.msg, [str(a) for a in r.args] if isinstance(r.args, tuple) else []])
for n in ("jax._src.interpreters.pxla", "jax._src.compiler", "jax._src.compilation_cache"):
    logging.getLogger(n).setLevel(logging.DEBUG); logging.getLogger(n).addHandler(H())
import jax
from jax import monitoring
events = []
monitoring.register_event_duration_secs_listener(lambda e, s, **kw: events.append([e, kw]))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
def train_step(x):
    return x * 2.0
jax.jit(train_step)(1.0)
jax.jit(lambda y: y + 1.0)(1.0)
print(json.dumps({"events": events, "lines": lines, "files": sorted(os.listdir(sys.argv[1]))}))
"""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([sys.executable, "-c", code, cache], capture_output=True,
                              text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def said():
    return _what_jax_says()


def test_knowledge_matches_this_jax(said):
    """Each per-version fact in jaxcompat/versions.py, checked on the JAX installed."""
    from jaxcache.jaxcompat import versions

    know = versions.knowledge(jax.__version__)
    compiles = [kw for e, kw in said["events"] if e == versions.EVENTS["compile"]]
    assert compiles, "no backend_compile_duration event: the probe sees no compile"
    named = all("fun_name" in kw for kw in compiles)
    assert named == know["events_name_module"], (
        f"JAX {jax.__version__}: duration events {'carry' if named else 'lack'} fun_name")
    compiling = [args[0] for msg, args in said["lines"]
                 if versions.classify(know, msg) == "compiling"]
    want = "train_step" if know["compiling_name"] == "bare" else "jit(train_step)"
    assert want in compiling, f"'Compiling %s' names {compiling}, expected {want!r}"
    modules = {args[0] for msg, args in said["lines"] if versions.classify(know, msg) == "miss"}
    assert {"jit_train_step", know["lambda_module"]} <= modules, modules
    entries = [f for f in said["files"] if f.startswith("jit_train_step-")]
    assert entries and all(f.endswith(know["entry_suffix"]) for f in entries), said["files"]


def _joined_source(*modules) -> str:
    """The modules' source with adjacent string literals joined: JAX splits long messages
    over lines ("... host "\n "callbacks"), and the probe matches the whole text."""
    source = "".join(inspect.getsource(m) for m in modules)
    return re.sub(r"[\"']\s*\n\s*f?[\"']", "", source)


def test_every_kind_of_message_the_probe_reads_is_in_jax_source():
    from jax._src import cache_key, compilation_cache, compiler
    from jax._src.interpreters import pxla

    from jaxcache.jaxcompat import versions

    sources = _joined_source(compiler, compilation_cache, cache_key, pxla)
    line = versions.parse(jax.__version__)[:2]
    for kind, prefix, fragments in versions.knowledge(jax.__version__)["messages"]:
        if line > versions.UNTIL.get(kind, line):
            continue  # no longer logged (test_messages_the_probe_parses_are_still_emitted)
        for text in ((prefix,) if prefix else ()) + fragments:
            longest = max(re.split(r"%[.\d]*[a-z]", text), key=len)
            assert longest in sources, f"JAX no longer logs {text!r} ({kind}): update versions.py"


def test_every_kind_of_warning_the_probe_reads_is_in_jax_source():
    from jax._src import compilation_cache, compiler, lru_cache

    from jaxcache.jaxcompat import versions

    joined = _joined_source(compiler, compilation_cache, lru_cache)
    for kind, prefix, fragments in versions.WARNINGS:
        for text in ((prefix,) if prefix else ()) + fragments:
            assert text in joined, f"JAX no longer warns {text!r} ({kind}): update versions.py"
    know = versions.knowledge(jax.__version__)
    assert versions.classify_warning(know, "Cache value for key 'k' of size 9 bytes exceeds "
                                     "the maximum cache size of 1 bytes") == "max-size"
    assert versions.classify_warning(know, "unrelated") is None


def test_knowledge_table_spans_exactly_the_supported_lines():
    from jaxcache.jaxcompat import versions

    lines = sorted({versions.parse(v)[:2] for v in versions.TESTED})
    assert lines[0] == versions.OLDEST_LINE and lines[-1] == versions.NEWEST_LINE
    assert [b[1] - a[1] for a, b in zip(lines, lines[1:], strict=False)] == [1] * (len(lines) - 1)
    assert versions.support("0.4.38") == "older" and versions.support("0.13.0") == "newer"
    assert versions.support("0.11.0") == "supported" and versions.support("0.12.0.1") == "tested"
    assert versions.support("0.7.0") == "supported" and versions.why_unverified("0.7.0") is None
    assert "0.4.30" in versions.why_unverified("0.4.30")


def test_settings_a_job_is_handed_are_options_jax_reads_from_those_variables():
    """jaxcompat.put_in_force (the granted directory, probe/site.py): the variable is the
    option JAX defines under that name, holding a value of the type it is parsed as; setting
    it puts it in force, and a variable JAX has no option for fails closed."""
    import os

    from jaxcache.jaxcompat import settings

    texts = {"JAX_COMPILATION_CACHE_DIR": os.path.abspath("cache")}
    assert set(texts) == set(settings.OPTIONS)
    before = {o: getattr(jax.config, o) for o, _ in settings.OPTIONS.values()}
    try:
        for variable, (option, kind) in settings.OPTIONS.items():
            assert variable == option.upper()
            assert before[option] is None or isinstance(before[option], kind), option
        held = jaxcompat.put_in_force({**texts, "JAXCACHE_AUDITED": "ignored"})
        assert held == {"jax_compilation_cache_dir": texts["JAX_COMPILATION_CACHE_DIR"]}
        assert held == {o: getattr(jax.config, o) for o in held}
        with pytest.raises(ValueError, match="JAX_NO_SUCH_OPTION"):
            jaxcompat.put_in_force({"JAX_NO_SUCH_OPTION": "1"})
    finally:
        for option, value in before.items():
            jax.config.update(option, value)


def test_the_backend_says_its_platform_and_version_for_the_fingerprint():
    """jaxcompat.hardware reads device.client.platform_version and device_kind (and
    compute_capability on GPU): if JAX moves them, the fingerprint loses its backend facts
    silently, so this fails loudly instead."""
    import jax
    import jax.numpy as jnp

    from jaxcache import fingerprint
    from jaxcache.jaxcompat import hardware

    (jnp.ones(2) + 1).block_until_ready()
    device = jax.devices()[0]
    assert isinstance(device.client.platform_version, str) and device.client.platform_version
    found = hardware.accelerator()
    assert found is not None and found.platform == device.platform == jax.default_backend()
    assert found.platform_version == device.client.platform_version
    assert found.device_kind == device.device_kind
    # the build this JAX runs is the jaxlib it imported, and that folder was hashed
    import jaxlib

    mine = fingerprint.current(fresh=True)
    assert mine.build is not None
    assert any(("jaxlib", os.path.realpath(p)) in mine.roots for p in jaxlib.__path__)
    assert dict(mine.build.versions)["jaxlib"] == jaxlib.__version__ or \
        jaxlib.__version__.startswith(dict(mine.build.versions)["jaxlib"])
