"""Which rank of a multi-process launch this process is, and the record name it gets.

Two ranks given one `--record R.json` (`srun -n 2 jaxcache run --record R.json`) would race
for one file; so under a launcher that started several processes each gets its own name, by
template (`{rank}`, `{host}`, `{pid}`) or, without one, `R.rank<N>.json`.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

from jaxcache import launchers
from jaxcache.errors import JaxcacheError

FIELDS = ("rank", "host", "pid")
_FIELD = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Rank:
    launcher: str | None  # slurm | ompi | pmi | jax; None outside a multi-process launch
    rank: int | None
    size: int | None
    host: str

    @property
    def multi(self) -> bool:
        return self.size is not None and self.size > 1


def detect(env: dict[str, str]) -> Rank:
    found = launchers.identify(env)
    return Rank(found["kind"], found["rank"], found["size"], socket.gethostname())


def record_path(path: str, env: dict[str, str], pid: int | None = None) -> str:
    """`path` with its fields filled in; under a multi-rank launch without `{rank}` or
    `{pid}`, `.rank<N>` is added before the extension so no two ranks share a file."""
    me = detect(env)
    fields = _FIELD.findall(path)
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise JaxcacheError(f"--record {path!r}: unknown field {{{unknown[0]}}} (use "
                            f"{', '.join('{' + f + '}' for f in FIELDS)})")
    values = {"rank": str(me.rank) if me.rank is not None else "0",
              "host": re.sub(r"[^A-Za-z0-9._-]", "_", me.host) or "host",
              "pid": str(pid if pid is not None else os.getpid())}
    filled = _FIELD.sub(lambda m: values[m.group(1)], path)
    if me.multi and not ({"rank", "pid"} & set(fields)):
        head, dot, ext = filled.rpartition(".")
        if dot and "/" not in ext:
            filled = f"{head}.rank{values['rank']}.{ext}"
        else:
            filled = f"{filled}.rank{values['rank']}"
    return filled
