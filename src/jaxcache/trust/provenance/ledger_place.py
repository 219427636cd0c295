"""Where the user's origin ledger lives, how big it may grow, and whether it is crowded: what
`jaxcache run` asks after every job (one stat), without importing the ledger's format
(trust/provenance/ledger_file.py: its line patterns and models cost every run ~1 ms)."""

from __future__ import annotations

import os

LEDGER_NAME = "origin.ledger"
MAX_BYTES = 64 << 20  # trust/inputs/trusted_file.py's limit; the witness stops appending before it


def ledger_path() -> str:
    """The user's origin ledger (beside the run records, in the state directory)."""
    from jaxcache.userdirs import user_dir

    return os.path.join(user_dir("state"), LEDGER_NAME)


def crowded(path: str | None = None) -> bool:
    """Has the ledger grown past half what the witness writes (gc/compaction.py compacts it
    after a job then)? One stat: `run` asks after every job."""
    try:
        st = os.stat(path or ledger_path(), follow_symlinks=False)
    except OSError:
        return False
    return st.st_size > MAX_BYTES // 2
