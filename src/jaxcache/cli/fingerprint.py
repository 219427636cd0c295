"""`jaxcache fingerprint`: what a compiled entry depends on that JAX's cache key leaves out."""

from __future__ import annotations

import argparse

from jaxcache.cli import common
from jaxcache.fingerprint.model import Fingerprint


def options(p: argparse.ArgumentParser) -> None:
    common.option(p, "--short", action="store_true",
                  help="Print the id alone (16 hex digits): a CI cache key's part, or the "
                       "namespace a mixed fleet shares a cache under.")
    common.option(p, "--compare", metavar="FILE",
                  help="Judge another host's fingerprint (the JSON of `jaxcache fingerprint "
                       "--format json` there): may entries it writes load here? Exit 1 when "
                       "not.")
    common.format_flag(p)


def handle(args: argparse.Namespace, tail: None) -> None:
    """This host's and this Python's build and CPU, which JAX's cache key leaves out.

      jaxcache fingerprint                 the build digest, the machine and the CPU
      jaxcache fingerprint --short         the id alone (CI cache keys, --namespace)
      jaxcache fingerprint --compare B.json   may entries written on B load here?

    JAX's key holds jaxlib's version string but no digest of its binaries, and on CPU it may
    hold no target features: another build of the same version, or a CPU without the
    writer's instructions, can load entries that crash or run another code path. The build is
    the BLAKE3 digest of every shared object of jaxlib and the installed plugins (libtpu, the
    CUDA/ROCm plugins) that this Python would load; the CPU is /proc/cpuinfo's instruction
    features. The first run after an install hashes the binaries (a few hundred MB, under a
    second) and says so on stderr; the digests are kept in the state folder under each
    file's identity, so later runs pay about a millisecond.

    Two fingerprints are compatible when the build and the machine are equal and the writer's
    CPU features are all on the reader's CPU (docs/reference/fingerprint.md has the rule per field).

    Exit code: 0; with --compare, 1 when the other host's entries may not load here; 2 bad
    input.
    """
    from jaxcache import fingerprint
    from jaxcache.report import fingerprint as formats

    if args.short and args.compare:
        common.usage(args, "--short and --compare go apart")

    mine = fingerprint.current(on_hashing=None if args.quiet else common.hashing_notice)
    if args.short:
        common.finish(args, mine.id + "\n", 0)
    if args.compare:
        other = _load(args, args.compare)
        from jaxcache.fingerprint import rule

        judged = rule.judge(other, mine)
        code = 0 if judged.loads else 1
        common.finish(args, formats.COMPARE[args.fmt](mine, other, judged), code)
    common.finish(args, formats.FORMATS[args.fmt](mine, bool(getattr(args, "verbose", False))), 0)


def _load(args: argparse.Namespace, path: str) -> Fingerprint:
    """Another host's fingerprint: its document read as a trusted input
    (trust/inputs/trusted_file.py: a file only you or root can change, bounded), parsed once; its
    own `id` is never taken."""
    from jaxcache import validate
    from jaxcache.text import quoted
    from jaxcache.trust.inputs import trusted_file as inputs

    found = inputs.read(path, inputs.FINGERPRINT)
    assert found is not None
    try:
        return Fingerprint.from_json(validate.parse_json(found.data))
    except (validate.Unreadable, validate.Invalid) as exc:
        common.usage(args, f"{quoted(path)} is no fingerprint: {exc}")
