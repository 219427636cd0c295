"""Imports point down the house's layers: a package imports only its own row or lower rows.

The order is written here once (docs/explanation/layout.md and shared/DESIGN.md show it). A
row's packages may import each other; nothing imports a row above its own, at module level
or inside a function (an import inside a function is still the dependency; only what a type
checker alone sees, under `if TYPE_CHECKING:`, is not counted). Parsed with ast (the import
graph of test_import_cycles.py): nothing is imported.

`BACK_ARROWS` lists the module imports that still run up, each waiting for its move (issue
27). It is a ratchet: a new import up fails, and so does one listed here that no longer exists,
so the list shrinks as the moves land and never hides a new one.
"""

from __future__ import annotations

from test_import_cycles import _imports, _modules

# lowest first; `jaxcache` is the package's own __init__ (the public facade)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_package", "text", "validate", "userdirs", "userns", "mounts", "jobenv",
     "thresholds", "jaxcompat", "fingerprint"),
    ("errors", "project"),
    ("trust",),
    ("documents", "folders", "api", "net"),
    ("seal",),
    ("lifecycle", "gc"),
    ("probe",),
    ("records",),
    ("run",),
    ("bench", "explain"),
    ("decide",),
    ("report",),
    ("cli", "examples", "jaxcache", "__main__"),
)

# Inside a package with sub-packages, the same rule between its parts, lowest first (a part
# is a sub-package or a module directly in the package): the kernel's view; the findings; the
# rules the judgement applies; where entries came from; the judgement; the trusted inputs
# (whose loader audits a file's folders, so it sits above the judgement); the commands' work.
SUBLAYERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "trust": (("kernel",), ("findings", "finding_codes"), ("rules",), ("provenance",),
              ("judgement",), ("inputs",), ("create", "listing")),
    "seal": (("signing",), ("publishing",), ("objects",), ("stores", "generations"), ("sweep",)),
}

# (importing module, imported module): imports up that wait for a move, none new. Empty since
# trust/ stopped importing seal/ (issue 27); a move that cannot land at once is listed here
BACK_ARROWS: frozenset[tuple[str, str]] = frozenset()


def _package(module: str) -> str:
    """The house's unit a module belongs to: jaxcache.trust.judgement.audit -> trust."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _rows() -> dict[str, int]:
    return {name: i for i, row in enumerate(LAYERS) for name in row}


def _imports_up() -> set[tuple[str, str]]:
    """Each (module, module it imports) where the second's row is above the first's."""
    known = _modules()
    rows = _rows()
    return {(name, dep) for name, path in known.items()
            for dep in _imports(name, path, known, parents=False)
            if rows[_package(dep)] > rows[_package(name)]}


def test_every_package_has_a_row():
    rows = _rows()
    missing = sorted({_package(m) for m in _modules()} - set(rows))
    assert not missing, f"packages in no row of LAYERS: {missing}"
    named = [name for row in LAYERS for name in row]
    assert len(named) == len(set(named)), "a package in two rows"


def test_the_checker_sees_an_arrow_up():
    """The checker itself: a function-level import up a row is an arrow (the run record
    finishing a job imports the probe's outcome: down, allowed; the CLI's wiring: the top)."""
    known = _modules()
    rows = _rows()
    deps = _imports("jaxcache.run.command", known["jaxcache.run.command"], known,
                    parents=False)
    assert "jaxcache.probe.runner" in deps  # imported inside run_job()
    assert rows[_package("jaxcache.probe.runner")] < rows["run"]
    assert _package("jaxcache") == "jaxcache" and rows["jaxcache"] == len(LAYERS) - 1


def test_no_import_runs_up_the_layers():
    found = _imports_up()
    new = sorted(found - BACK_ARROWS)
    assert not new, "imports up the layers (move the concept to its layer):\n" + "\n".join(
        f"  {a} -> {b}" for a, b in new)
    gone = sorted(BACK_ARROWS - found)
    assert not gone, f"no longer imported up, remove from BACK_ARROWS: {gone}"


def _part(module: str) -> tuple[str, str] | None:
    """(package, part) for a module inside a sub-layered package: jaxcache.trust.kernel.walk
    -> (trust, kernel); None for the package itself or one without SUBLAYERS."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in SUBLAYERS:
        return None
    return parts[1], parts[2]


def test_every_part_of_a_sublayered_package_has_a_row():
    named = {(pkg, part) for pkg, rows in SUBLAYERS.items() for row in rows for part in row}
    found = {p for m in _modules() if (p := _part(m)) is not None}
    assert found == named, (f"parts in no row: {sorted(found - named)}; "
                            f"rows naming no part: {sorted(named - found)}")


def test_no_import_runs_up_inside_a_package():
    known = _modules()
    rows = {(pkg, part): i for pkg, prows in SUBLAYERS.items()
            for i, row in enumerate(prows) for part in row}
    up = sorted((name, dep) for name, path in known.items()
                for dep in _imports(name, path, known, parents=False)
                if (a := _part(name)) and (b := _part(dep)) and a[0] == b[0]
                and rows[b] > rows[a])
    assert not up, "imports up a package's parts:\n" + "\n".join(f"  {a} -> {b}" for a, b in up)
