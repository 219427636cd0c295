"""The sealed cache a `jaxcache run --sealed` job enables, as typed data: `jaxcache run` writes
it as JSON into the job's environment (jobenv.SEAL), the job's probe reads it back once
(lifecycle/sealing.py `enable_from_env`), leniently (documents/fields.py). SealOptions: run's
flags for it, as the wrapper holds them (the wrapper never imports sealing.py, the job's side).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from jaxcache import jobenv
from jaxcache.documents.fields import integer, items, mapping, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.trust.inputs.public_keys import PublicKey

ENV = jobenv.SEAL  # JSON: path, signing_key, trusted_keys, local, policy


@dataclass(frozen=True, slots=True)
class SealSpec:
    path: str  # the shared directory or bucket URL
    signing_key: str | None  # a key file or a pkcs11: URI: the job publishes
    trusted_keys: tuple[str, ...]
    local: str | None  # the private local tier
    policy: str | None
    identity: str | None = None  # "ci": the job signs keyless, as its CI identity
    sigstore_config: str | None = None  # the Sigstore trust config it signs with
    generation: str | None = None  # a reader of the generation this pointer names

    @property
    def publisher(self) -> bool:
        """The job signs what it writes (a key, or keyless): SealOptions.publisher's word."""
        return self.signing_key is not None or self.identity is not None

    def to_env(self) -> str:
        return json.dumps({"path": self.path, "signing_key": self.signing_key,
                           "trusted_keys": list(self.trusted_keys), "local": self.local,
                           "policy": self.policy, "identity": self.identity,
                           "sigstore_config": self.sigstore_config,
                           "generation": self.generation})

    @classmethod
    def from_env(cls, value: str) -> SealSpec:
        doc = mapping(json.loads(value))
        return cls(text(doc.get("path")) or "", text(doc.get("signing_key")),
                   tuple(k for k in items(doc.get("trusted_keys")) if isinstance(k, str)),
                   text(doc.get("local")), text(doc.get("policy")), text(doc.get("identity")),
                   text(doc.get("sigstore_config")), text(doc.get("generation")))


# one environment string: Linux refuses any longer than 128 KiB (MAX_ARG_STRLEN), and then
# the job does not start at all; half of it leaves the job's own variables their room
ENV_MAX_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class PrefetchSpec:
    """The entries a sealed bucket reader fetches ahead (seal/stores/prefetch.py): `jaxcache run`
    writes it into the job's environment (jobenv.PREFETCH) from the newest record of the same
    command and cache; the probe starts the fetch from it at interpreter start."""

    keys: tuple[str, ...]
    source: str | None  # the record they came from
    workers: int
    budget_bytes: int

    def to_env(self) -> str:
        return json.dumps({"keys": list(self.keys), "source": self.source,
                           "workers": self.workers, "budget_bytes": self.budget_bytes})

    def within(self, limit: int = ENV_MAX_BYTES) -> PrefetchSpec:
        """This plan with as many of its keys, in order, as fit in one environment string of
        `limit` bytes; the rest are left to JAX's own order (a record naming 512 keys of long
        module names made a variable Linux refuses, and the job could not start)."""
        size = len(PrefetchSpec((), self.source, self.workers, self.budget_bytes).to_env())
        kept = 0
        for key in self.keys:
            size += len(json.dumps(key)) + 2  # ", " between keys (ASCII: plan_keys' shape)
            if size > limit:
                break
            kept += 1
        return self if kept == len(self.keys) else \
            PrefetchSpec(self.keys[:kept], self.source, self.workers, self.budget_bytes)

    @classmethod
    def from_env(cls, value: str) -> PrefetchSpec:
        doc = mapping(json.loads(value))
        return cls(tuple(k for k in items(doc.get("keys")) if isinstance(k, str)),
                   text(doc.get("source")), integer(doc.get("workers")) or 1,
                   integer(doc.get("budget_bytes")) or 0)


@dataclass(frozen=True, slots=True)
class SealOptions:
    """`--sealed` and friends on `jaxcache run`: what the job's probe will enable."""

    signing_key: str | None = None
    trusted_keys: tuple[str, ...] = ()
    local: str | None = None
    identity: str | None = None  # "ci": keyless, as the CI job's identity
    sigstore_config: str | None = None
    # a bucket reader fetches ahead the entries the same job hit last time (prefetch.py):
    # off with --no-prefetch; the pool's size and the bytes it may hold at once
    prefetch: bool = True
    prefetch_from: str | None = None  # the run record whose hits to fetch (else the newest)
    prefetch_workers: int = 8
    prefetch_memory: int = 1 << 30
    generation: str | None = None  # a reader of the generation this pointer names

    @property
    def publisher(self) -> bool:
        """The job signs what it writes (a key, or keyless as its CI identity): it compiles
        and publishes its misses; a reader only loads what a publisher signed."""
        return self.signing_key is not None or self.identity is not None

    def public_keys(self) -> tuple[PublicKey, ...]:
        from jaxcache.trust.inputs import public_keys as trustkeys

        found = tuple(trustkeys.load_public(k) for k in self.trusted_keys)
        if self.signing_key is not None:  # a publisher's: the signing key's loader only here
            from jaxcache.trust.inputs import signing_keys as keymod

            found += (keymod.load_signing(self.signing_key).public,)
        return found

    def job_env(self, path: str, policy: str | None) -> dict[str, str]:
        """Environment for the job: its probe enables the sealed cache after `import jax`."""
        import os

        from jaxcache import _package

        absolute = [k if k.startswith("ed25519:") else os.path.abspath(k)
                    for k in self.trusted_keys]
        signing = self.signing_key  # a pkcs11: URI is no path: it goes as it is
        if signing:
            from jaxcache.trust.inputs.pkcs11_uri import is_uri

            signing = signing if is_uri(signing) else os.path.abspath(signing)
        value = SealSpec(path, signing, tuple(absolute),
                         self.local and os.path.abspath(self.local),
                         policy and os.path.abspath(policy), self.identity,
                         self.sigstore_config and os.path.abspath(self.sigstore_config),
                         self.generation).to_env()
        return {ENV: value, jobenv.LIB: _package.HOME}
