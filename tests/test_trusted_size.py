"""The trusted path's size (scripts/trusted_size.py, docs/explanation/security-model.md): the script
runs, every module and function it lists exists, and the page shows each part it measures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "trusted_size.py"


def test_the_trusted_path_is_measured_item_by_item():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json"], capture_output=True,
                          text=True, check=True)
    doc = json.loads(proc.stdout)
    assert doc["code_lines"] == sum(i["code_lines"] for i in doc["items"]) > 0
    assert all(0 < i["code_lines"] <= i["lines"] for i in doc["items"]), doc["items"]
    listed = {i["item"] for i in doc["items"]}
    # the remembered audit is on the path, all three of its modules
    assert {"trust/judgement/shortcut.py", "trust/judgement/memo_format.py",
            "trust/inputs/audit_memo.py"} <= listed


def test_the_security_model_shows_every_part_the_script_measures():
    doc = json.loads(subprocess.run([sys.executable, str(SCRIPT), "--json"],
                                    capture_output=True, text=True, check=True).stdout)
    page = (ROOT / "docs" / "explanation" / "security-model.md").read_text()
    assert "make trusted-size" in page
    for part in doc["parts"]:
        assert f"\n| {part} | " in page, part
