"""No import cycle among jaxcache's modules, counting imports inside functions too.

A function-level import that only breaks a cycle hides a dependency pointing the wrong way
(the two modules are one concern, or a shared piece belongs below both); the data flows one
way: trust -> lifecycle/run/probe -> record -> bench/explain -> decide. Imports a type checker
alone sees (`if TYPE_CHECKING:`, `if False:`) do not run and are not counted. Parsed with ast:
nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import paths

SRC = paths.CHECKOUT / "src"


def _modules() -> dict[str, Path]:
    """jaxcache's modules by dotted name (a package by its __init__.py)."""
    out = {}
    for path in sorted((SRC / "jaxcache").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_only(test: ast.expr) -> bool:
    if isinstance(test, ast.Constant):
        return test.value is False
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def _imports(name: str, path: Path, known: dict[str, Path], parents: bool = True) -> set[str]:
    """The jaxcache modules `name` imports when it runs, at module level or in a function.
    parents=False: `from pkg import submodule` counts the submodule only, not `pkg` (whose
    __init__ runs too, but names nothing the importer uses)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_only(child.test):
                for stmt in child.orelse:
                    visit(stmt)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                subs = {f"{module}.{alias.name}" for alias in child.names}
                found.update(subs)  # submodules
                if parents or not subs <= set(known):
                    found.add(module)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return {m for m in found if m in known and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def test_the_graph_sees_function_level_imports():
    """The checker itself: a lazy import inside a function is an edge, a TYPE_CHECKING one
    is not, and a cycle through them is found."""
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    assert "jaxcache.trust.create" in graph["jaxcache.lifecycle.enabling"]  # inside enable()
    # its imports are TYPE_CHECKING-only or by name, but for its version
    assert graph["jaxcache"] == {"jaxcache._package"}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_jaxcache_modules():
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _collapsed(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The graph among `package`'s direct children (modules and sub-packages): a -> b when
    a module in a imports one in b."""
    depth = len(package.split("."))

    def child(name: str) -> str | None:
        parts = name.split(".")
        if len(parts) <= depth or parts[:depth] != package.split("."):
            return None
        return ".".join(parts[: depth + 1])

    out: dict[str, set[str]] = {}
    for name, deps in graph.items():
        a = child(name)
        if a is None:
            continue
        out.setdefault(a, set())
        for dep in deps:
            b = child(dep)
            if b is not None and b != a:
                out[a].add(b)
                out.setdefault(b, set())
    return out


def test_no_circle_among_the_parts_of_any_package():
    """Package-internal circles too: within every package (jaxcache itself, trust, seal...),
    its sub-packages and modules import one another one way only, so each folder reads
    bottom-up (a circle through two folders is one concern split in two, or a piece that
    belongs below both)."""
    known = _modules()
    graph = {name: _imports(name, path, known, parents=False) for name, path in known.items()}
    packages = sorted({name for name, path in known.items() if path.name == "__init__.py"})
    circles = {p: c for p in packages if (c := _cycle(_collapsed(graph, p)))}
    assert not circles, "circles among a package's parts:\n" + "\n".join(
        f"  {p}: " + " -> ".join(c) for p, c in circles.items())


def test_the_collapsed_graph_sees_a_circle_through_two_folders():
    graph = {"j.a.x": {"j.b.y"}, "j.b.y": {"j.a.z"}, "j.a.z": set()}
    assert _cycle(_collapsed(graph, "j")) == ["j.a", "j.b", "j.a"]
    assert _cycle(_collapsed(graph, "j.a")) is None
