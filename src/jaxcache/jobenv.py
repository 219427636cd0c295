"""The environment protocol between jaxcache and the probe in a job: every variable's name, once.

`jaxcache run` (and bench, explain -- CMD, enable(sealed=True)) hands the job's processes
these variables; the probe (probe/site.py, the sitecustomize injected into the job, and
probe/document.py) reads them. The probe is loaded by path in the job's own Python, which may
not be able to import jaxcache, so it spells the names itself: tests/test_jobenv.py checks
that every JAXCACHE_ name it spells is one of these. Standard library only, at the bottom of
the house.
"""

from __future__ import annotations

PROBE_DIR = "JAXCACHE_PROBE_DIR"  # where each process writes its probe document
LIB = "JAXCACHE_LIB"  # the jaxcache package's directory, for a Python that cannot import it
# the run's lease: a FIFO in its private probe folder whose read end the `jaxcache run` that
# granted the cache holds open until it ends, as PID:START:HOST:PATH (launch.py). A grant
# (AUDITED, SEAL) is good only while the lease is held: a process that reaches JAX's cache
# after its run ended is stopped there
LEASE = "JAXCACHE_LEASE"
AUDITED = "JAXCACHE_AUDITED"  # the one directory JAX may open a cache in (plain caches)
WITNESS = "JAXCACHE_WITNESS"  # the origin ledger each entry the job writes goes into
ORIGIN_GATE = "JAXCACHE_ORIGIN_GATE"  # the ledger each load is judged against (under CI)
# JSON: trusted writers' ledgers the gate reads too (the policy's trusted_ledgers that vouched)
ORIGIN_TRUSTED = "JAXCACHE_ORIGIN_TRUSTED"
SEAL = "JAXCACHE_SEAL"  # JSON: a sealed cache's path, keys, local tier and policy
# JSON: the entries a sealed bucket reader fetches ahead (lifecycle/seal_spec.PrefetchSpec); one
# process of the job fetches them, the first to import jax (it claims them in the probe folder)
PREFETCH = "JAXCACHE_PREFETCH"
FINGERPRINT = "JAXCACHE_FINGERPRINT"  # JSON: the build and CPU `jaxcache run` hashed

# granted by one audit for one run: never inherited from an outer run (a sealed outer run's
# SEAL would make a nested plain run's probe enable the outer's sealed cache instead of its own)
PER_RUN = (AUDITED, WITNESS, ORIGIN_GATE, ORIGIN_TRUSTED, FINGERPRINT, PREFETCH, SEAL)
ALL = frozenset({PROBE_DIR, LIB, LEASE, AUDITED, WITNESS, ORIGIN_GATE, ORIGIN_TRUSTED, SEAL,
                 FINGERPRINT, PREFETCH})


def ungranted(env: dict[str, str]) -> dict[str, str]:
    """`env` without what only an audit grants a job: the cache directory (which reaches JAX
    through the probe, never the environment) and the per-run variables (an outer run's
    would be taken for this run's grant)."""
    return {k: v for k, v in env.items() if k != "JAX_COMPILATION_CACHE_DIR" and k not in PER_RUN}
