"""What must match for two processes' timings to be comparable.

Versions, the build (each process's jaxlib build digest, which the version string does not
tell: records/fingerprints.py), Python, platform and devices, XLA flags, the cache options
(the directory itself excluded: every trial gets its own), and the input shapes and dtypes
each module compiled for. Not the build's fingerprint itself (fingerprint/: what an entry
depends on that JAX's key leaves out), of which this reads the build digest only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.bench.run_parts import BenchRun

_OPTION_SKIP = {"jax_compilation_cache_dir"}


@dataclass(frozen=True)
class Comparable:
    jax: str | None
    jaxlib: str | None
    builds: tuple[str, ...]  # the processes' jaxlib build digests, sorted ("?" where unknown)
    plugins: tuple[tuple[str, str], ...]
    python: str | None
    system: str | None
    machine: str | None
    backend: str | None
    device_kind: str | None
    device_count: int | None
    xla_flags: str | None
    cache_options: tuple[tuple[str, str], ...]
    shapes: tuple[tuple[str, str], ...]  # (module, input shapes) pairs, sorted

    @classmethod
    def of(cls, run: BenchRun, path: str = "") -> Comparable:
        from jaxcache.records.process_facts import facts_of

        setup = run.setup
        shapes = sorted({(m.name or "?", m.input_shapes or "?")
                         for m in run.record.processes[0].modules})
        builds = sorted({f.fingerprint.build.digest if f.fingerprint and f.fingerprint.build
                         else "?" for f in facts_of([(path, run.record.raw)])})
        return cls(
            setup.jax, setup.jaxlib, tuple(builds), setup.plugins, setup.python, setup.system,
            setup.machine, setup.backend, setup.device_kind, setup.device_count,
            setup.xla_flags,
            tuple(sorted((k, repr(v)) for k, v in setup.cache_options if k not in _OPTION_SKIP)),
            tuple(shapes),
        )

    def diff(self, other: Comparable) -> list[str]:
        """Human-readable differences, empty when comparable."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                if f.name in ("shapes", "cache_options", "plugins", "builds"):
                    only_a = sorted(set(a) - set(b))
                    only_b = sorted(set(b) - set(a))
                    out.append(f"{f.name}: {only_a} vs {only_b}")
                else:
                    out.append(f"{f.name}: {a!r} vs {b!r}")
        return out

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["builds"] = list(self.builds)
        d["plugins"] = dict(self.plugins)
        d["cache_options"] = {k: v for k, v in self.cache_options}
        d["shapes"] = [{"module": m, "input_shapes": s} for m, s in self.shapes]
        return d
