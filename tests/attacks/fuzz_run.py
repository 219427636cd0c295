"""Coverage-guided fuzzing of one target of tests/attacks/fuzz_targets.py with atheris (libFuzzer).

  python tests/attacks/fuzz_run.py TARGET [libFuzzer flags...] [CORPUS_DIR...]
  e.g. python tests/attacks/fuzz_run.py record -runs=10000 -rss_limit_mb=1024 \
         tests/attacks/fuzz_corpus/record

jaxcache is instrumented for coverage; every input goes through fuzz_targets.one. The mutator
knows the shape of a document: half of the time it parses the input (JSON, TOML as text) and
damages the tree (a field deleted, retyped, nested deep, made huge, negative, NaN, a string
full of control characters), the rest libFuzzer's own byte mutations; so both wrong-typed
fields and broken syntax are reached. A crash (any exception but jaxcache's own one-line
error) or an input over -rss_limit_mb ends the run with a nonzero exit code and the input
written under -artifact_prefix.
"""

from __future__ import annotations

import json
import random
import sys

import atheris

with atheris.instrument_imports(include=["jaxcache"]):
    import fuzz_targets  # noqa: E402 (instrumented: it imports jaxcache's readers)

    from jaxcache import (  # noqa: F401  (the modules the targets reach, instrumented)
        decide,
        validate,
    )
    from jaxcache.documents import read  # noqa: F401
    from jaxcache.explain import reasons  # noqa: F401
    from jaxcache.records.kept import totals as stats  # noqa: F401
    from jaxcache.report import decide as decide_report  # noqa: F401
    from jaxcache.report import (  # noqa: F401
        explain,
        records,
    )
    from jaxcache.report.bench import compare  # noqa: F401
    from jaxcache.seal.signing import signature_file as sigfile  # noqa: F401
    from jaxcache.trust.inputs import policy, policy_toml  # noqa: F401

ODD = ["", "\x1b[2J\x1b[31mSEALED\x1b[0m", "\r\n\t\x00\x7f", "..", "/", "\u202e", "\ud800",
       "x" * 5000]
VALUES = [None, True, False, 0, -1, 1 << 70, 1e308, -1e-308, 0.5, float("nan"),
          float("inf"), [], {}, [[[[[[[[[[]]]]]]]]]], {"a": {"b": {"c": {}}}}, *ODD]


def _nodes(node, path=()):
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for k, v in items:
        yield from _nodes(v, (*path, k))


def _deep(depth: int):
    out: object = 1
    for _ in range(depth):
        out = [out] if depth % 2 else {"k": out}
    return out


def mutate_tree(doc, rng: random.Random):
    paths = list(_nodes(doc))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        if not path:
            continue
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
        except (KeyError, IndexError, TypeError):
            continue
        last = path[-1]
        roll = rng.random()
        try:
            if roll < 0.15 and isinstance(parent, dict):
                del parent[last]
            elif roll < 0.2:
                parent[last] = _deep(rng.choice((20, 33, 40, 200)))
            elif roll < 0.3 and isinstance(parent.get(last) if isinstance(parent, dict)
                                           else parent[last], list):
                parent[last] = parent[last] * rng.randint(2, 10)
            else:
                parent[last] = rng.choice(VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def _toml(value, key: str = "") -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '""'
    if isinstance(value, float) and value != value:
        return "nan"
    return json.dumps(value)


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, (dict, list)):
            try:
                out = json.dumps(mutate_tree(doc, rng)).encode("utf-8", "surrogatepass")
            except (ValueError, RecursionError):
                out = b""
            if out and len(out) <= max_size:
                return out
        if TARGET == "policy" and rng.random() < 0.5:
            return _toml_mutation(data, rng, max_size)
    return atheris.Mutate(data, max_size)


def _toml_mutation(data: bytes, rng: random.Random, max_size: int) -> bytes:
    """A policy's value replaced by another type or a deep nest, as TOML text."""
    lines = data.decode("utf-8", "replace").splitlines()
    spots = [i for i, line in enumerate(lines) if " = " in line]
    if not spots:
        return data
    i = rng.choice(spots)
    key = lines[i].split(" = ", 1)[0]
    depth = rng.choice((30, 40, 2000))
    deep = rng.choice(("[" * depth + "1" + "]" * depth,
                       "{a = " * depth + "1" + "}" * depth))
    lines[i] = f"{key} = {rng.choice([_toml(v) for v in VALUES] + [deep])}"
    out = "\n".join(lines).encode("utf-8", "surrogatepass")
    return out if len(out) <= max_size else data


TARGET = sys.argv[1]


def main() -> None:
    target = fuzz_targets.TARGETS[TARGET]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    flags = sys.argv[2:]
    if not any(f.startswith("-max_len=") for f in flags):
        flags.insert(0, "-max_len=65536")  # room for a tree mutation of a 10 kB record
    atheris.Setup([sys.argv[0], *flags], lambda data: fuzz_targets.one(target, data),
                  custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
