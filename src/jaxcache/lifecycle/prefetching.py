"""A sealed reader's fetch ahead (seal/stores/prefetch.py) through its process's life: started
by the probe as the job begins to import JAX, kept here, adopted by the sealed enable after that
import (or started by the enable where no early start was tried: `enable(prefetch=keys)`), and
summed up for the run record.

The early start does its set-up on the thread that imports JAX, before JAX's import goes on:
jaxcache's modules, the store's client and the keys. The pool's threads then only wait on the
network while JAX imports. A thread of ours importing beside the job's `import jax` could meet
importlib's deadlock detection, which raises in either thread (in the job's: its own import
fails) or hands one a module half made; so no thread of ours imports while JAX does.
"""

from __future__ import annotations

import threading

from jaxcache.lifecycle.seal_spec import PrefetchSpec, SealSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from jaxcache.seal.objects.object_store import ObjectStore
    from jaxcache.seal.stores.prefetch import Prefetcher
    from jaxcache.trust.rules.keyring import KeyRing


# --- the early pool, kept from the probe's start to the enable that adopts it --------------
_STARTED: dict[str, Prefetcher] = {}
_EARLY_ERRORS: dict[str, str] = {}  # why the early start failed, for the enable to report
_STARTED_LOCK = threading.Lock()


def _begin(prefetcher: Prefetcher) -> Prefetcher:
    """Start `prefetcher` and keep it for the backend of its bucket to adopt (only once it
    started: one that failed to is closed, and the caller keeps why)."""
    try:
        prefetcher.start()
    except BaseException:
        prefetcher.close()
        raise
    with _STARTED_LOCK:
        old = _STARTED.pop(prefetcher.store.url, None)
        _STARTED[prefetcher.store.url] = prefetcher
        _EARLY_ERRORS.pop(prefetcher.store.url, None)
    if old is not None:
        old.close()
    return prefetcher


def _failed_early(url: str, reason: str) -> None:
    """The early start for `url` failed: the enable's pool says why."""
    with _STARTED_LOCK:
        _EARLY_ERRORS[url] = reason


def adopt(url: str, trusted: KeyRing) -> Prefetcher | str | None:
    """The prefetch started for `url`, once, if it verified with these very keys (else it is
    dropped: what it fetched was judged by another ring); else why the early start did not
    happen (a str), or None when none was tried."""
    with _STARTED_LOCK:
        found = _STARTED.pop(url, None)
        failed = _EARLY_ERRORS.pop(url, None)
    if found is None:
        return failed
    if found.trusted != trusted:
        found.close()
        return "the early fetch verified with other keys than the enable's"
    return found


def start_early(seal_value: str, prefetch_value: str) -> None:
    """The probe's call as `import jax` begins: the keys `jaxcache run` found (PrefetchSpec)
    fetched and verified with the keys the sealed enable will judge by (the policy's for this
    bucket and those given), kept for that enable to adopt. Nothing is handed to JAX here: the
    enable audits first. Never raises: what failed is kept for the enable, whose record says
    why nothing was fetched ahead."""
    import os

    from jaxcache.seal.stores import prefetch as ahead

    url = None
    try:
        from jaxcache.seal.objects import store_for_url as objects
        from jaxcache.trust.inputs import policy as policymod
        from jaxcache.trust.inputs import public_keys as trustkeys
        from jaxcache.trust.kernel.principals import Accounts
        from jaxcache.trust.rules import keyring, target

        spec, plan = SealSpec.from_env(seal_value), PrefetchSpec.from_env(prefetch_value)
        if spec.publisher or spec.generation is not None:
            return  # a publisher's misses are compiled and published; a generation's reader
            # fetches ahead once its manifest is verified (generation_cache.py)
        where = target.resolve(spec.path)
        store: ObjectStore
        if where.url is not None:
            url = target.parse_bucket(spec.path).text
            store = objects.open_store(target.parse_bucket(url))  # prepared as it starts
        elif where.path is not None:  # a sealed directory on a network filesystem
            from jaxcache.seal.objects.directory_objects import DirectoryObjects

            url = os.path.realpath(where.path)  # as the enable's audit resolves it
            store = DirectoryObjects(url)
        else:
            return
        extra = tuple(trustkeys.load_public(k) for k in spec.trusted_keys)
        pol = policymod.load(spec.policy, Accounts())
        keys = keyring.for_rule(pol.rule_for(url), extra)
        _begin(ahead.Prefetcher(store, keys, plan.keys, workers=plan.workers,
                                     budget_bytes=plan.budget_bytes, source=plan.source))
    except Exception as exc:  # noqa: BLE001 - the job goes on; the enable says why, once
        if url is not None:
            _failed_early(url, f"{type(exc).__name__}: {exc}")


def for_enable(url: str, store: Callable[[], ObjectStore] | None, trusted: KeyRing,
               plan: PrefetchSpec | None, *, reader: bool = True) -> Prefetcher | None:
    """The pool the enable hands its backend: the early one if it verified with these very
    keys; else, with a plan and no early start tried, one started now on `store()`. An early
    start that failed is not tried again (its client may hang as long again): its plan's keys
    all count as not fetched, and the record says why. None without a plan, or for a
    publisher (`reader` False), which fetches nothing ahead: JAX asks for each entry itself.
    `store` None: the sealed directory at `url`, read as an object store (directory_objects.py),
    made only where a pool starts."""
    found = adopt(url, trusted)
    if found is not None and not isinstance(found, str):  # the early start's pool
        if reader:
            return found
        found.close()
        return None
    if not reader or plan is None or not plan.keys:
        return None
    # the pool's module, only where one starts now (a publisher's job or a reader's without a
    # plan, the common case, never imports it)
    from jaxcache.seal.stores import prefetch as ahead

    try:
        if store is None:
            from jaxcache.seal.objects.directory_objects import DirectoryObjects

            source: ObjectStore = DirectoryObjects(url)
        else:
            source = store()
        pool = ahead.Prefetcher(source, trusted, plan.keys, workers=plan.workers,
                                budget_bytes=plan.budget_bytes, source=plan.source,
                                early_error=found)
        return pool.abandon() if found is not None else pool.start()
    except Exception:  # noqa: BLE001 - a fetch ahead never stops the job: JAX asks as without
        return None


def on_network(path: str) -> bool:
    """Is the directory on a network filesystem (NFS, Lustre, a FUSE mount: trust/kernel/
    mounts.py), where each of JAX's one-at-a-time reads waits a round trip? False when that
    cannot be told."""
    import os

    from jaxcache import mounts

    try:
        found = mounts.mount_of(path, os.stat(path).st_dev, mounts.read_mounts())
    except (OSError, ValueError):
        return False
    return found is not None and found.category == "network"


def absent_from(keys: tuple[str, ...], local: str) -> tuple[str, ...]:
    """The keys whose entry this build's folder of the local tier (`--local`) does not hold: a
    sealed reader loads that tier first, so fetching those ahead would only be wasted. Asked
    of the folder's descriptor from the audit's walk (trust/kernel/walk.py), no entry's link
    followed; a folder that cannot be walked filters nothing (a fetch wasted, never wrong)."""
    import os
    import stat

    from jaxcache.errors import JaxcacheError
    from jaxcache.lifecycle.local_tier import build_tier, local_path
    from jaxcache.seal.publishing import tier_names as names
    from jaxcache.trust.kernel.walk import walk_open
    from jaxcache.trust.rules import target

    if not keys:
        return keys
    try:
        walked, fd = walk_open(build_tier(local_path(target.resolve(local), local)))
    except (OSError, JaxcacheError):
        return keys
    try:
        if not walked.exists:
            return keys

        def held(key: str) -> bool:
            try:
                st = os.stat(names.entry(key), dir_fd=fd, follow_symlinks=False)
            except OSError:
                return False
            return stat.S_ISREG(st.st_mode)

        return tuple(k for k in keys if not held(k))
    finally:
        os.close(fd)


def of_keys(keys: tuple[str, ...]) -> PrefetchSpec | None:
    """`enable(sealed=True, prefetch=keys)`: a plan of these keys, the pool's defaults."""
    from jaxcache.seal.stores import prefetch as ahead

    return PrefetchSpec(keys, None, ahead.WORKERS, ahead.BUDGET_BYTES) if keys else None


def summary(pool: Prefetcher | None) -> dict[str, object] | None:
    """What the fetch ahead did (prefetch.PrefetchCounts), for the record; None: none."""
    if pool is None:
        return None
    c = pool.counts()
    return {"planned": c.planned, "prefetched": c.prefetched, "used": c.used,
            "wasted": c.wasted, "not_fetched": c.not_fetched, "not_found": c.not_found,
            "failed": c.failed, "rejected": c.rejected, "saved_s": c.saved_s,
            "source": c.source, "early_error": c.early_error}
