"""`jaxcache config`: the project file, then each setting, its value and where it came from;
`--format json` (schema jaxcache.config/1) says the same."""

from __future__ import annotations

from jaxcache.documents.kinds import envelope
from jaxcache.report import jsonout
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from jaxcache.project.chosen import Setting
    from jaxcache.project.locate import Found


def file_line(start: str, found: Found | None) -> str:
    """The answer's first line: which file, if any, the settings came from."""
    if found is None:
        return (f"project file: none (no .jaxcache.toml or pyproject.toml in "
                f"{safe(start) or 'the working directory'} or above)")
    if found.data is None:
        return (f"project file: none ({safe(found.path)} has no [tool.jaxcache] table; the "
                "nearest pyproject.toml ends the search)")
    return f"project file: {found.label}"


def _value(setting: Setting) -> str:
    return "none" if setting.value is None else safe(str(setting.value))


def render_text(start: str, found: Found | None, settings: Sequence[Setting]) -> str:
    names = max(len(s.name) for s in settings)
    values = max(len(_value(s)) for s in settings)
    rows = [f"  {s.name:<{names}}  {_value(s):<{values}}  {s.source_text}" for s in settings]
    return "\n".join([file_line(start, found), *rows]) + "\n"


def render_json(start: str, found: Found | None, settings: Sequence[Setting]) -> str:
    shown = None if found is None else {
        "path": safe(found.path), "table": found.table, "settings_read": found.data is not None}
    return jsonout.document({
        **envelope("config"), "directory": safe(start), "project_file": shown,
        "settings": [{"name": s.name,
                      "value": safe(s.value) if isinstance(s.value, str) else s.value,
                      "source": {"kind": s.source.value, "where": s.where}}
                     for s in settings]})
