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
    from jaxcache.project.project_toml import ProjectConfig


def file_line(config: ProjectConfig) -> str:
    """The answer's first line: which file, if any, the settings came from."""
    if config.path is None:
        return (f"project file: none (no .jaxcache.toml or pyproject.toml in "
                f"{safe(config.start) or 'the working directory'} or above)")
    if not config.read:
        return (f"project file: none ({safe(config.path)} has no [tool.jaxcache] table; the "
                "nearest pyproject.toml ends the search)")
    return f"project file: {config.label}"


def _value(setting: Setting) -> str:
    return "none" if setting.value is None else safe(str(setting.value))


def render_text(config: ProjectConfig, settings: Sequence[Setting]) -> str:
    names = max(len(s.name) for s in settings)
    values = max(len(_value(s)) for s in settings)
    rows = [f"  {s.name:<{names}}  {_value(s):<{values}}  {s.source_text}" for s in settings]
    return "\n".join([file_line(config), *rows]) + "\n"


def render_json(config: ProjectConfig, settings: Sequence[Setting]) -> str:
    found = None if config.path is None else {
        "path": safe(config.path), "table": config.table, "settings_read": config.read}
    return jsonout.document({
        **envelope("config"), "directory": safe(config.start), "project_file": found,
        "settings": [{"name": s.name,
                      "value": safe(s.value) if isinstance(s.value, str) else s.value,
                      "source": {"kind": s.source.value, "where": s.where}}
                     for s in settings]})
