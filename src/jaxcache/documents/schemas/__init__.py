"""The JSON Schemas of every `--format json` document (and `bench --json`, and the run record),
shipped with the package: one source of truth that the tests validate against and the docs link
to."""

from __future__ import annotations

import json
from importlib import resources

from jaxcache.documents.kinds import KINDS

NAMES = KINDS  # every kind has its schema file here


def load(name: str) -> dict[str, object]:
    """The schema for a document kind (`jaxcache.NAME/1`): e.g. load("audit")."""
    if name not in NAMES:
        raise KeyError(name)
    schema: dict[str, object] = json.loads(  # a file of this package: a JSON object
        resources.files(__name__).joinpath(f"{name}.schema.json").read_text())
    return schema
