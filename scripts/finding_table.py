"""Write docs/reference/finding-codes.md's tables from the catalogue (trust/finding_codes.py).

    python scripts/finding_table.py --write    # rewrite the two tables in place
    python scripts/finding_table.py --check    # exit 1 when they are not current

docs/reference/finding-codes.md holds two tables headed `| code | effect | meaning |`: the
audit's codes, then `jaxcache net`'s. Only their rows change; the prose around them is the
page's own.
tests/trust/test_finding_codes.py runs --check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from jaxcache.report.finding_codes import markdown_tables  # noqa: E402

PAGE = ROOT / "docs" / "reference" / "finding-codes.md"
HEADER = "| code | effect | meaning |"


def rewritten(text: str) -> str:
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line == HEADER]
    tables = markdown_tables()
    if len(starts) != len(tables):
        raise SystemExit(f"{PAGE}: {len(starts)} tables headed {HEADER!r}, expected "
                         f"{len(tables)}")
    for start, table in reversed(list(zip(starts, tables, strict=True))):
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        lines[start:end] = table.rstrip("\n").split("\n")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = PAGE.read_text()
    new = rewritten(text)
    if args.write:
        PAGE.write_text(new)
    elif new != text:
        sys.stderr.write(f"{PAGE} is not current: python scripts/finding_table.py --write\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
