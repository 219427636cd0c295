"""docs/explanation/layout.md is the map of src/jaxcache a reader opens first: every module is named
in its folder's entry, and every module an entry names exists. Read as text: the tree's folder lines
(`  trust/`, `    kernel/`) open an entry, which runs until the next one."""

from __future__ import annotations

import re

from support import paths

SRC = paths.CHECKOUT / "src" / "jaxcache"
DOC = paths.CHECKOUT / "docs" / "explanation" / "layout.md"


def _entries() -> dict[str, str]:
    """Each folder of src/jaxcache ("" for the package's own modules) -> its entry's text."""
    text = DOC.read_text(encoding="utf-8")
    lines = text[text.index("src/jaxcache/\n"):].splitlines()[1:]
    entries: dict[str, str] = {"": ""}
    open_folders: list[tuple[int, str]] = []
    current = ""
    for line in lines:
        if not line.startswith(" "):  # the tree below src/jaxcache/ ends
            break
        header = re.match(r"( +)([a-z_]+)/(?: |$)", line)
        if header and len(header.group(1)) <= 6:
            indent = len(header.group(1))
            while open_folders and open_folders[-1][0] >= indent:
                open_folders.pop()
            open_folders.append((indent, header.group(2)))
            current = "/".join(name for _, name in open_folders)
            entries[current] = line[header.end():]
            continue
        module = re.match(r"( +)[\w.]+\.py(?: |,|$)", line)
        if module and len(module.group(1)) <= 6:  # "  api.py  ...", "    findings.py  ...":
            indent = len(module.group(1))  # a module of the folder that holds the line's column
            while open_folders and open_folders[-1][0] >= indent:
                open_folders.pop()
            current = "/".join(name for _, name in open_folders)
        entries[current] += "\n" + line
    return entries


def _named(entry: str) -> set[str]:
    return set(re.findall(r"[\w/]+\.py\b", entry))


def test_every_module_is_named_in_its_folders_entry():
    entries = _entries()
    missing = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "__init__.py" or "__pycache__" in path.parts:
            continue
        folder = path.parent.relative_to(SRC).as_posix()
        folder = "" if folder == "." else folder
        parent, _, last = folder.rpartition("/")
        said = _named(entries.get(folder, "")) | {
            n.rpartition("/")[2] for n in _named(entries.get(parent, ""))
            if n.startswith(f"{last}/")}
        if path.name not in said:
            missing.append(path.relative_to(SRC).as_posix())
    assert not missing, ("modules docs/explanation/layout.md does not name in their folder's "
                         f"entry: {missing}")


def test_every_module_the_layout_names_exists():
    absent = []
    for folder, entry in _entries().items():
        for name in _named(entry):
            here = SRC / folder / name
            if not (here.exists() or (SRC / name).exists() or (paths.CHECKOUT / name).exists()
                    or (SRC / folder).parent.joinpath(name).exists()):
                absent.append(f"{folder or '.'}: {name}")
    assert not absent, f"modules docs/explanation/layout.md names that do not exist: {absent}"
