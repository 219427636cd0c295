"""Which rank of a multi-process launch this process is, and the record name it gets.

Two ranks given one `--record R.json` (`srun -n 2 jaxcache run --record R.json`) would race
for one file; so under a launcher that started several processes each gets its own name, by
template (`{rank}`, `{host}`, `{pid}`) or, without one, `R.rank<N>.json`.
"""

from __future__ import annotations

import os

from jaxcache.errors import JaxcacheError
from jaxcache.probe import launchers

FIELDS = ("rank", "host", "pid")


class Rank:
    """Who this process is in its launch. A plain class, not a dataclass: it is made on
    `jaxcache run`'s path before the job starts, where every import counts."""

    __slots__ = ("launcher", "rank", "size", "host")

    def __init__(self, launcher: str | None, rank: int | None, size: int | None,
                 host: str) -> None:
        self.launcher = launcher  # slurm | ompi | pmi | jax; None outside a multi-rank launch
        self.rank, self.size, self.host = rank, size, host

    @property
    def multi(self) -> bool:
        return self.size is not None and self.size > 1


def _fields(template: str) -> list[str]:
    """The {name} fields of a template, in order."""
    out, rest = [], template
    while "{" in rest:
        rest = rest[rest.index("{") + 1:]
        if "}" not in rest:
            break
        name, rest = rest.split("}", 1)
        out.append(name)
    return out


def _safe_host(host: str) -> str:
    """The host name as a piece of a file name: ASCII letters, digits and . _ - only, never
    starting with a dot, so no host name (even '.' or '..') can make a '.' or '..' component
    or leave the folder the template names."""
    clean = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in host)
    return ("_" + clean[1:] if clean.startswith(".") else clean) or "host"


def detect(env: dict[str, str]) -> Rank:
    found = launchers.identify(env)
    kind, rank, size = found["kind"], found["rank"], found["size"]
    return Rank(kind if isinstance(kind, str) else None, rank if isinstance(rank, int) else None,
                size if isinstance(size, int) else None, os.uname().nodename)


def record_path(path: str, env: dict[str, str], pid: int | None = None) -> str:
    """`path` with its fields filled in; under a multi-rank launch without `{rank}` or
    `{pid}`, `.rank<N>` is added before the extension so no two ranks share a file."""
    me = detect(env)
    fields = _fields(path)
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise JaxcacheError(f"--record {path!r}: unknown field {{{unknown[0]}}} (use "
                            f"{', '.join('{' + f + '}' for f in FIELDS)})")
    values = {"rank": str(me.rank) if me.rank is not None else "0",
              "host": _safe_host(me.host),
              "pid": str(pid if pid is not None else os.getpid())}
    filled = path
    for name, value in values.items():
        filled = filled.replace("{" + name + "}", value)
    if me.multi and not ({"rank", "pid"} & set(fields)):
        head, dot, ext = filled.rpartition(".")
        if dot and "/" not in ext:
            filled = f"{head}.rank{values['rank']}.{ext}"
        else:
            filled = f"{filled}.rank{values['rank']}"
    return filled
