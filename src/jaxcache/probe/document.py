"""The probe's document: what one process of the job writes into $JAXCACHE_PROBE_DIR.

Loaded by path, with recorder.py, once the job imports jax (probe/site.py): standard library
only, no jaxcache imports. Every function takes the recorder's state `S`. The document says
which process wrote it (`identity`: JAX's process index and count, the host, the launcher's
ids) and how this process sees the cache directory (`cache_view`); it is written atomically.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from jaxcache.probe.recorder import LoadBeside, Module, ProbeState

SCHEMA = "jaxcache.probe/1"
_LAUNCHERS_COPY = "_jaxcache_launchers.py"  # jaxcache/probe/launchers.py: the launcher's rank ids

_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt",
            "jax-rocm60-plugin", "jax-rocm7-plugin", "libtpu", "libtpu-nightly", "jax-metal")
_CACHE_OPTIONS = (
    "jax_compilation_cache_dir", "jax_enable_compilation_cache",
    "jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes",
    "jax_compilation_cache_max_size", "jax_persistent_cache_enable_xla_caches",
    "jax_explain_cache_misses", "jax_raise_persistent_cache_errors",
    "jax_compilation_cache_check_contents", "jax_compilation_cache_include_metadata_in_key",
    "jax_share_binary_between_hosts",
)


def cache_setting() -> tuple[object, object, object]:
    try:
        import jax

        # JAX defines its config options at run time: Config has no attribute for them
        return (jax.config.jax_compilation_cache_dir,  # type: ignore[attr-defined]
                jax.config.jax_enable_compilation_cache,  # type: ignore[attr-defined]
                jax.config.jax_persistent_cache_min_compile_time_secs)  # type: ignore[attr-defined]
    except Exception:
        return None, None, None


def first_compile(S: ProbeState) -> None:
    if S.options is None:
        S.env_cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR")
        S.cache_view = cache_view(S)
        try:
            import jax

            S.options = {}
            for name in _CACHE_OPTIONS:
                try:
                    value = getattr(jax.config, name)
                except AttributeError:
                    continue
                ok = isinstance(value, (str, int, float, bool, type(None)))
                S.options[name] = value if ok else str(value)
        except Exception as exc:  # never break the program
            S.options = {"error": repr(exc)}


def cache_in_use(S: ProbeState) -> dict[str, object] | None:
    """The directory of the cache object JAX holds now (not the setting, which JAX ignores
    once its cache exists), and whether jaxcache served or refused it."""
    if S.compat is None:
        return None
    try:
        return S.compat.current_cache()
    except Exception:
        return None


def platform(S: ProbeState) -> dict[str, object]:
    try:
        import jax

        if not S.modules:
            return {}
        devices = jax.devices()
        return {"backend": jax.default_backend(), "device_kind": devices[0].device_kind,
                "device_count": len(devices), "local_device_count": jax.local_device_count(),
                "process_index": jax.process_index(), "process_count": jax.process_count()}
    except Exception as exc:
        return {"error": repr(exc)}


def identity(S: ProbeState, load_beside: LoadBeside) -> dict[str, object]:
    """Which process of the job this is: JAX's process index and count (asked only once
    something compiled: before that, asking would create the backend and break a later
    jax.distributed.initialize), the host, and the launcher's ids from the environment."""
    if S.proc_ids is None and S.modules:
        try:
            import jax

            S.proc_ids = (jax.process_index(), jax.process_count())
        except Exception:
            pass
    index, count = S.proc_ids or (None, None)
    try:
        launcher = load_beside(_LAUNCHERS_COPY, os.path.join("probe", "launchers.py")).identify()
    except Exception:
        launcher = None
    return {"process_index": index, "process_count": count, "host": os.uname().nodename,
            "launcher": launcher}


def cache_view(S: ProbeState) -> dict[str, object]:
    """How this process sees the directory jaxcache audited (or JAX's own setting): its
    path, the filesystem and inode it resolves to here, jaxlib and XLA_FLAGS. A rank on
    another host or in another mount namespace can see another directory at the same path."""
    audited = os.environ.get("JAXCACHE_AUDITED")
    path = audited or (S.options or {}).get("jax_compilation_cache_dir")
    view: dict[str, Any] = {"path": path if isinstance(path, str) else None,
            "source": "audited" if audited else "jax", "device": None, "inode": None,
            "mode": None, "uid": None, "fs_type": None, "mnt_ns": None,
            "jaxlib": (S.jax or {}).get("jaxlib"), "xla_flags": os.environ.get("XLA_FLAGS")}
    try:
        view["mnt_ns"] = os.readlink("/proc/self/ns/mnt")
    except OSError:
        pass
    if view["path"] is None or "://" in view["path"]:
        return view
    try:
        st = os.stat(view["path"])
    except OSError as exc:
        view["error"] = exc.strerror
        return view
    dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    view.update(device=dev, inode=st.st_ino, mode="%04o" % (st.st_mode & 0o7777),
                uid=st.st_uid)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if left.split()[2:3] == [dev]:
                    view["fs_type"] = right.split()[0]
                    break
    except (OSError, IndexError):
        pass
    return view


def module_doc(S: ProbeState, m: Module) -> dict[str, object]:
    doc = {k: v for k, v in m.items() if k not in ("thread", "key")}
    doc["in_progress"] = m["compile_or_load_s"] is None and any(
        c is m for c in S.current.values())
    return doc


def write(S: ProbeState, final: bool, load_beside: LoadBeside, out: str | None) -> None:
    if not out or os.getpid() != S.pid:
        return
    try:
        import json

        with S.lock:  # the watcher thread and the exit write never interleave
            if S.final_done:
                return
            doc: dict[str, object] = {
                "schema": SCHEMA, "pid": S.pid, "ppid": os.getppid(), "final": final,
                "argv": list(sys.argv), "started": S.started, "now": time.time(),
                "import_jax_started": S.import_jax_started,
                "import_jax_s": S.import_jax_s, "jax": S.jax,
                "identity": identity(S, load_beside), "cache_view": S.cache_view,
                "cache_options_at_first_compile": S.options, "counts": dict(S.counts),
                "env_cache_dir_at_first_compile": S.env_cache_dir,
                "modules": [module_doc(S, m) for m in S.modules],
                "warnings": list(S.warnings)}
            if S.seal is not None:
                doc["seal"] = S.seal[0].summary(S.seal[1])
            if S.guard is not None:
                doc["cache_guard"] = dict(S.guard)
            if S.compat is not None:
                doc["cache_dirs"] = S.compat.guard_log()
            if final:
                doc["platform"] = platform(S)
                doc["jax"] = dict(S.jax, plugins=plugins())
                doc["fingerprint"] = fingerprint(S)
            S.last_write = time.monotonic()
            S.unsaved = False
            path = os.path.join(out, "probe-%d.json" % S.pid)
            tmp = path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, default=str)
            os.replace(tmp, path)
            S.final_done = final
    except Exception:
        pass  # the probe must never change what the program does


# the packages whose shared objects XLA runs: jaxcache/fingerprint/binaries.py PACKAGES
# (spelled here too, the probe imports no jaxcache; tests/probe pins that they agree)
_BUILD_PACKAGES = ("jaxlib", "jax_plugins", "libtpu", "libtpu_nightly", "jax_cuda12_plugin",
                   "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin")
_FINGERPRINT_ENV = "JAXCACHE_FINGERPRINT"  # jaxcache/jobenv.py FINGERPRINT


def loaded_roots() -> list[list[str]]:
    """(package, real folder) of each build package this process imported: jaxlib's folder
    is what the build digest must speak of."""
    out: list[list[str]] = []
    for name in _BUILD_PACKAGES:
        module = sys.modules.get(name)
        for folder in list(getattr(module, "__path__", None) or ()):
            if isinstance(folder, str):
                out.append([name, os.path.realpath(folder)])
    return out


def fingerprint(S: ProbeState) -> dict[str, object]:
    """What the build this process ran is (fingerprint/ in jaxcache, which reads this): the
    fingerprint `jaxcache run` handed the job when it speaks of the jaxlib loaded here (its
    roots hold that folder), else none and the loaded folders, for jaxcache to hash on the
    same host; and the backend's own facts. Only at the final write: nothing per compile."""
    out: dict[str, object] = {"given": None, "roots": [], "accelerator": None}
    try:
        roots = loaded_roots()
        out["roots"] = roots
        value = os.environ.get(_FINGERPRINT_ENV)
        if value:
            import json

            doc = json.loads(value)
            given = {tuple(r) for r in doc.get("roots") or () if isinstance(r, list)}
            jaxlib = [f for n, f in roots if n == "jaxlib"]
            if jaxlib and all(("jaxlib", f) in given for f in jaxlib):
                doc.pop("roots", None)
                out["given"] = doc
    except Exception:
        pass
    out["accelerator"] = accelerator(S)
    return out


def accelerator(S: ProbeState) -> dict[str, str] | None:
    """The default backend's platform, version, device kind and compute capability, as
    jaxcache/jaxcompat/hardware.py reads them; asked only if something compiled (asking
    earlier creates the backend)."""
    if not S.modules:
        return None
    try:
        import jax

        device = jax.devices()[0]
        version = getattr(device.client, "platform_version", "") or ""
        capability = getattr(device, "compute_capability", "") or ""
        return {"platform": str(device.platform), "platform_version": str(version)[:8192],
                "device_kind": str(device.device_kind)[:256],
                "compute_capability": str(capability)[:256]}
    except Exception:
        return None


def dist(name: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def plugins() -> dict[str, str]:
    """Versions of the accelerator plugins that are installed (at exit: off the hot path)."""
    found: dict[str, str] = {}
    for name in _PLUGINS:
        version = dist(name)
        if version is not None:
            found[name] = version
    return found
