"""A ratchet on the path of `jaxcache run --sealed`: the jaxcache modules its wrapper and its job
import (scripts/import_counts.py, a real publisher's run and a reader's that loads what it
signed) never grow past what they are now.

Every module on that path is code a reviewer of the sealed run reads and start-up time every job
pays. Each was taken off it because the path did not need it (the origin ledger and the audit
memo are a plain cache's; the token's loader a pkcs11: URI's; the prefetch pool's and the
directory's object store only where a fetch ahead starts; the ledger's compaction after a job
that can have written it), never by merging modules: a change that puts one back fails here,
and says which. Lower the numbers as the path shrinks (the target: WRAPPER_LIMIT and TOTAL_LIMIT
in the script), never raise them to let a module in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_counts.py"

# the most each run may reach (publisher, reader): the wrapper's modules, the job's, and the
# distinct ones in both. (+2 in the wrapper since a record written with --record, as these
# runs' are, is kept in the state dir too: folders.py and records/record_dir.py, which every
# run without --record has always imported.)
MOST = {"publisher": {"wrapper_count": 89, "job_count": 83, "total_count": 118},
        "reader": {"wrapper_count": 86, "job_count": 83, "total_count": 117}}


def test_the_sealed_run_imports_no_more_modules_than_it_did():
    pytest.importorskip("jax")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", "--list"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = {r["run"]: r for r in json.loads(proc.stdout)["runs"]}
    grown = {(name, count): (run[count], most)
             for name, run in runs.items() for count, most in MOST[name].items()
             if run[count] > most}
    assert not grown, (f"the sealed run's path grew (count, limit): {grown}; its modules: "
                       + json.dumps({n: {"wrapper": r["wrapper"], "job": r["job"]}
                                     for n, r in runs.items()}))
