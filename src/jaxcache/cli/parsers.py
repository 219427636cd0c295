"""The argparse classes of jaxcache's parsers: one-line usage errors, help as written."""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (where to read more included), exit 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.stderr.flush()
        sys.exit(2)


class Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, so their example blocks keep their layout; option help is
    wrapped to the terminal, at most 100 columns."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=max(min(_columns(), 100) - 2, 50))


def _columns() -> int:
    """shutil.get_terminal_size's answer ($COLUMNS, else the terminal on stdout, else 80),
    without importing shutil (and its compressors): argparse builds a formatter for every
    option it adds."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns \
                if sys.__stdout__ is not None else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80
