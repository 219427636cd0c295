"""Where things are: the checkout, its source, the test programs (one place, so a test can
move between folders of tests/ without its paths moving)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
CHECKOUT = TESTS.parent
SRC = CHECKOUT / "src"
PROGRAMS = TESTS / "programs"
EXAMPLES = CHECKOUT / "examples"
