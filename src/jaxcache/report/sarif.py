"""SARIF 2.1.0 output so code-scanning tools can gate on findings (audit and net)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath
from urllib.parse import quote

from jaxcache._package import __version__
from jaxcache.report import jsonout
from jaxcache.text import safe
from jaxcache.trust.findings import Finding

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from jaxcache.documents.fields import JsonObject

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"



def _uri(path: str, base: str | None) -> str:
    if base and not PurePosixPath(path).is_absolute():
        path = base.rstrip("/") + "/" + path
    return "file://" + quote(safe(path))


def render_findings(findings: Iterable[Finding], properties: Mapping[str, object], *,
                    base: str | None = None, files: bool = True) -> str:
    """One run, one rule per finding code; locations only for findings about files."""
    rules: dict[str, JsonObject] = {}
    results = []
    for f in findings:
        rules.setdefault(f.code, {
            "id": f.code,
            "shortDescription": {"text": f.code.replace(".", ": ").replace("-", " ")},
            "defaultConfiguration": {"level": f.effect.sarif_level},
        })
        result: dict[str, object] = {
            "ruleId": f.code,
            "level": f.effect.sarif_level,
            "message": {"text": f.message + (f" What to do: {f.remedy}" if f.remedy else "")},
            "properties": {"effect": f.effect, **properties},
        }
        where = f.path or base
        if files and where:
            result["locations"] = [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(where, base)}}}]
        results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "jaxcache", "version": __version__,
                                "rules": list(rules.values())}},
            "results": results,
            "properties": properties,
        }],
    }
    return jsonout.document(doc)
