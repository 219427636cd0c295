"""SARIF 2.1.0 output so code-scanning tools can gate on the audit's findings."""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from urllib.parse import quote

from jaxcache import __version__
from jaxcache.display import safe
from jaxcache.trust.audit import AuditReport
from jaxcache.trust.findings import NOTE, UNSAFE, UNVERIFIABLE, WARNING

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {UNSAFE: "error", UNVERIFIABLE: "error", WARNING: "warning", NOTE: "note"}


def _uri(path: str, base: str | None) -> str:
    if base and not PurePosixPath(path).is_absolute():
        path = base.rstrip("/") + "/" + path
    return "file://" + quote(safe(path))


def render_audit(r: AuditReport) -> str:
    rules: dict[str, dict] = {}
    results = []
    for f in r.findings:
        rules.setdefault(f.code, {
            "id": f.code,
            "shortDescription": {"text": f.code.replace(".", ": ").replace("-", " ")},
            "defaultConfiguration": {"level": _LEVEL[f.effect]},
        })
        result = {
            "ruleId": f.code,
            "level": _LEVEL[f.effect],
            "message": {"text": f.message + (f" What to do: {f.remedy}" if f.remedy else "")},
            "properties": {"effect": f.effect, "verdict": r.verdict.value},
        }
        where = f.path or r.resolved or r.path
        if where:
            result["locations"] = [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(where, r.resolved)}}}]
        results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "jaxcache", "version": __version__,
                                "rules": list(rules.values())}},
            "results": results,
            "properties": {"verdict": r.verdict.value, "path": safe(r.requested)},
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
