"""The kinds of document jaxcache writes, and the envelope every one of them starts with.

Each kind's schema id is `jaxcache.<kind>/1`, and its JSON Schema is schemas/<kind>.schema.json
(the run record's fields are also told in docs/reference/run-record.md). A document's first two
fields are its schema id and the tool that wrote it (`envelope`); `-o FILE` and the outputs of bench
and run recognise a file as their own by that id's prefix (`prefix`). The probe's per-process
document (jaxcache.probe/1) is written by the probe itself, in the job, and is not one of these.
"""

from __future__ import annotations

from jaxcache._package import __version__

# in the order `jaxcache --help` lists the commands that write them
KINDS = ("audit", "init", "ls", "ls-bucket", "run", "bench", "bench-compare", "explain", "net",
         "fingerprint", "decide", "keygen", "seal-scan", "generation", "gc", "records-list",
         "records-prune", "records-stats", "finding-codes", "config")


def schema(kind: str) -> str:
    """The schema id of a kind: `jaxcache.audit/1`."""
    if kind not in KINDS:
        raise KeyError(kind)
    return f"jaxcache.{kind}/1"


def prefix(kind: str) -> str:
    """What a document of this kind's schema id starts with, whatever its version."""
    return schema(kind).rsplit("/", 1)[0] + "/"


def envelope(kind: str) -> dict[str, object]:
    """The first fields of every document: the schema id and the tool that wrote it."""
    return {"schema": schema(kind), "tool": {"name": "jaxcache", "version": __version__}}
