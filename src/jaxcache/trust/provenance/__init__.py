"""Where a plain cache's entries came from: the origin ledger's file and its writes, files' birth
times, and each entry's origin (the ledger read as a trusted input is inputs/ledger.py)."""
