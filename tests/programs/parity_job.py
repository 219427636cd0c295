"""One side of a parity test: the same scenarios on JAX's own cache or on the sealed backend.

    parity_job.py MODE BASE KEY SCENARIO...      MODE: jax | sealed
Each scenario gets its own directory under BASE (the cross-process ones share one), is
enabled the way a user of that MODE would, and ends disabled again. Prints one JSON line:
per scenario, what a user can observe (cache hits, module names on disk, get/put results,
warnings), so the test can compare the two modes.
"""

import json
import os
import sys
import warnings

import jax
import jax.numpy as jnp
from jax._src import compilation_cache as cc

import jaxcache

MODE, BASE, KEY = sys.argv[1], sys.argv[2], sys.argv[3]
HITS = []
jax.monitoring.register_event_listener(
    lambda event, **kw: HITS.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
jax.config.update("jax_persistent_cache_enable_xla_caches", "none")  # as sealed runs have it
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
X = jnp.ones(4)


def fn(name, k=3.0):
    def f(x):
        return x * k + k
    f.__name__ = f.__qualname__ = name
    return jax.jit(f)


def run(name, k=3.0):
    """Compile (or load) and run one function; the cache hits it caused."""
    before = len(HITS)
    jax.block_until_ready(fn(name, k)(X))
    return len(HITS) - before


def directory(name):
    return os.path.join(BASE, MODE, name)


def on(path):
    if MODE == "jax":
        os.makedirs(path, mode=0o700, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", path)
        cc.reset_cache()
    else:
        jaxcache.enable(path, sealed=True, signing_key=KEY, reset=True)


def off():
    jax.clear_caches()
    jax.config.update("jax_compilation_cache_max_size", -1)
    if MODE == "jax":
        jax.config.update("jax_compilation_cache_dir", None)
        cc.reset_cache()
    else:
        jaxcache.disable()
    jax.config.update("jax_enable_compilation_cache", True)


def modules(path):
    names = os.listdir(path) if os.path.isdir(path) else []
    return sorted(n[:-71] for n in names if n.endswith("-cache"))


def entry_size(path, module):
    (name,) = [n for n in os.listdir(path) if n.startswith(module + "-") and
               n.endswith("-cache")]
    return os.path.getsize(os.path.join(path, name))


def cross_write():
    d = directory("cross")
    on(d)
    return {"hits": [run("cross_a"), run("cross_b", 4.0)], "disk": modules(d)}


def cross_read():
    d = directory("cross")
    on(d)
    hits = [run("cross_a"), run("cross_b", 4.0), run("cross_new", 5.0)]
    return {"hits": hits, "disk": modules(d)}


def thresholds():
    d = directory("thresholds")
    on(d)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
    run("slow_enough_never")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 1 << 30)
    run("too_small", 4.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    run("written", 5.0)
    return {"disk": modules(d)}


def _lru(name, before):
    d = directory(name)
    probe = directory(name + "_size")
    on(probe)
    run("size_probe", 9.0)
    size = entry_size(probe, "jit_size_probe")
    off()
    limit = int(size * 2.5)
    if before:
        jax.config.update("jax_compilation_cache_max_size", limit)
    on(d)
    if not before:
        jax.config.update("jax_compilation_cache_max_size", limit)
    run("lru_a", 2.0)
    run("lru_b", 3.0)
    jax.clear_caches()
    hit_a = run("lru_a", 2.0)  # a is now more recent than b
    run("lru_c", 4.0)  # room for two: b goes
    after_c = modules(d)
    jax.clear_caches()
    return {"hit_a": hit_a, "after_c": after_c, "hit_b": run("lru_b", 3.0),
            "disk": modules(d)}


def max_size_before():
    return _lru("lru_before", True)


def max_size_after():
    return _lru("lru_after", False)


def max_size_after_first_compile():
    """JAX reads the limit when it creates its cache object; the sealed store at each
    write (a documented difference)."""
    d = directory("lru_late")
    on(d)
    run("late_a", 2.0)
    jax.config.update("jax_compilation_cache_max_size", 1)
    run("late_b", 3.0)
    return {"disk": modules(d)}


def reset():
    d = directory("reset")
    on(d)
    first = run("reset_a")
    cc.reset_cache()
    jax.clear_caches()
    return {"hits": [first, run("reset_a")], "disk": modules(d)}


def names():
    d = directory("names")
    on(d)
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (150, 156, 157, 160, 161, 180, 181, 184, 185, 200):
            run("n" * (n - 4), float(n))  # module jit_nnn...: n characters
    written = modules(d)
    jax.clear_caches()
    for n in (150, 157, 160, 161, 181, 184):
        out[n] = run("n" * (n - 4), float(n))
    return {"written": [len(m) for m in written], "hits": out,
            "write_errors": sum("Error writing" in str(w.message) for w in caught)}


def values():
    d = directory("values")
    on(d)
    jax.jit(lambda x: x + 1)(X)  # creates JAX's cache object
    cache = cc._cache
    key = "jit_values-" + "ab" * 32
    cache.put(key, b"")
    empty = cache.get(key)
    key2 = "jit_values-" + "cd" * 32
    cache.put(key2, b"first")
    cache.put(key2, b"second")  # first writer wins
    return {"empty": None if empty is None else empty.hex(), "first": cache.get(key2).decode(),
            "missing": cache.get("jit_values-" + "ef" * 32)}


def disabled_then_enabled():
    d = directory("toggle")
    on(d)
    jax.config.update("jax_enable_compilation_cache", False)
    cc.reset_cache()  # as JAX's own test does: the first compile now runs disabled
    run("toggle_a")
    jax.config.update("jax_enable_compilation_cache", True)
    still = modules(d)
    cc.reset_cache()  # JAX remembers the first compile's decision until a reset
    run("toggle_b", 4.0)
    return {"while_disabled": still, "disk": modules(d)}


def _tamper(d, victim, donor):
    """Put donor's executable under victim's key (for the sealed mode, signed by the
    trusted key: a publisher that signed what it did not compile)."""
    def find(m):
        (n,) = [n for n in os.listdir(d) if n.startswith(m + "-") and n.endswith("-cache")]
        return n
    v, g = find(victim), find(donor)
    with open(os.path.join(d, g), "rb") as f:
        data = f.read()
    os.unlink(os.path.join(d, v))
    with open(os.path.join(d, v), "wb") as f:
        f.write(data)
    if MODE == "sealed":
        from jaxcache.seal.signing import signature_file as sigfile
        from jaxcache.trust.inputs import signing_keys as keys
        sig = os.path.join(d, v + ".sig")
        os.unlink(sig)
        with open(sig, "wb") as f:
            f.write(sigfile.sign(v[:-6], data, keys.load_signing(KEY)))


def check_contents():
    d = directory("check")
    on(d)
    jax.config.update("jax_compilation_cache_check_contents", True)
    first = run("check_a")  # first sight: recompiled, compared, written
    run("check_b", 7.0)
    jax.clear_caches()
    second = run("check_a")  # verified in this process: a hit
    _tamper(d, "jit_check_a", "jit_check_b")
    cc.reset_cache()  # a new cache object forgets which keys it verified
    jax.clear_caches()
    try:
        run("check_a")
        mismatch = None
    except cc.CacheVerificationError as exc:  # JAX raises it, whatever raise_..._errors says
        mismatch = str(exc).split(" for key ")[0]
    jax.config.update("jax_compilation_cache_check_contents", False)
    return {"hits": [first, second], "mismatch": mismatch}


def _entry(d, module):
    (name,) = [n for n in os.listdir(d) if n.startswith(module + "-") and n.endswith("-cache")]
    return os.path.join(d, name)


def _load_again(module, raise_errors, k=3.0):
    """A new cache object and a fresh compile of `module`, under
    jax_raise_persistent_cache_errors = raise_errors: hits, the exception's type (None), JAX's
    read-error warnings (the error's type) and jaxcache's rejections."""
    cc.reset_cache()
    jax.clear_caches()
    jax.config.update("jax_raise_persistent_cache_errors", raise_errors)
    hits, raised = None, None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                hits = run(module, k)
            except Exception as exc:  # noqa: BLE001 - what JAX let through is the result
                raised = type(exc).__name__
    finally:
        jax.config.update("jax_raise_persistent_cache_errors", False)
    said = [str(w.message) for w in caught]
    lead = "Error reading persistent compilation cache entry for"
    return {"hits": hits, "raised": raised,
            "read_errors": [m.split(": ")[1] for m in said if m.startswith(lead)],
            "rejected": sum("rejected cache entry" in m for m in said)}


def _dir_in_place(raise_errors):
    """A directory where the entry was (JAX's read_bytes() raises IsADirectoryError)."""
    d = directory(f"dir_in_place_{raise_errors}")
    on(d)
    run("dir_in_place")
    entry = _entry(d, "jit_dir_in_place")
    os.unlink(entry)
    os.mkdir(entry, 0o700)
    return _load_again("dir_in_place", raise_errors)


def dir_in_place_warns():
    return _dir_in_place(False)


def dir_in_place_raises():
    return _dir_in_place(True)


def _socket_in_place(raise_errors):
    """A socket where the entry was: a file nobody can open for reading (ENXIO), which JAX's
    read_bytes() fails on as on an unreadable file."""
    import socket

    d = directory(f"socket_in_place_{raise_errors}")
    on(d)
    run("socket_in_place", 6.0)
    entry = _entry(d, "jit_socket_in_place")
    os.unlink(entry)
    here = os.getcwd()
    os.chdir(d)  # a socket's path must be short: bound by its name in its directory
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(os.path.basename(entry))
    finally:
        os.chdir(here)
    try:
        return _load_again("socket_in_place", raise_errors, 6.0)
    finally:
        sock.close()


def socket_in_place_warns():
    return _socket_in_place(False)


def socket_in_place_raises():
    return _socket_in_place(True)


def rejected_raising():
    """An entry whose bytes were changed, under jax_raise_persistent_cache_errors: JAX tries
    to load them; the sealed reader rejects them (its signature fails), a reported miss."""
    d = directory("rejected_raising")
    on(d)
    run("tampered")
    with open(_entry(d, "jit_tampered"), "r+b") as f:
        f.write(b"tampered")
    return _load_again("tampered", True)


out = {}
for scenario in sys.argv[4:]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out[scenario] = globals()[scenario]()
    off()
    if MODE == "sealed":  # never an entry without its signature
        out.setdefault("unsigned", [])
        for _root, _, files in os.walk(os.path.join(BASE, MODE)):
            for n in files:
                if n.endswith("-cache") and n + ".sig" not in files and n[:-6] + ".sig" \
                        not in files:
                    out["unsigned"].append(n)
print(json.dumps(out))
