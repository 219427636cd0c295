"""`jaxcache demo`: the trust story on directories it builds, then removes.

It makes a workspace it owns, creates a private cache there with `init`, builds the classic
mistake next to it (a cache inside a world-writable folder without the sticky bit, as on many
shared scratch volumes), and audits both.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable

from jaxcache.report import text
from jaxcache.trust import create
from jaxcache.trust.audit import audit
from jaxcache.trust.findings import Verdict


def run(*, keep: bool = False, echo: Callable[[str], None] = print) -> int:
    workspace = tempfile.mkdtemp(prefix="jaxcache-demo-")
    os.chmod(workspace, 0o755)  # noqa: S103 - ours: made just now, so others can reach "shared/" below
    try:
        echo(f"== 1. jaxcache init {workspace}/private-cache\n")
        result = create.init(os.path.join(workspace, "private-cache"))
        echo(text.render_audit(result.report))
        echo(f"-> {'ready' if result.ok else 'refused: ' + str(result.refused)}\n\n")

        shared = os.path.join(workspace, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)  # noqa: S103 - the mistake, built on purpose in our own workspace
        os.mkdir(os.path.join(shared, "jax-cache"), 0o755)
        echo(f"== 2. jaxcache audit {shared}/jax-cache   (shared/ is 0777, no sticky bit)\n\n")
        unsafe = audit(os.path.join(shared, "jax-cache"))
        echo(text.render_audit(unsafe))
        ok = result.ok and result.report.verdict is Verdict.PRIVATE and \
            unsafe.verdict is Verdict.UNSAFE
        echo(f"\ndemo {'passed' if ok else 'FAILED'}: private cache "
             f"{result.report.verdict.value}, shared one {unsafe.verdict.value}\n")
        return 0 if ok else 1
    finally:
        if keep:
            echo(f"kept {workspace}\n")
        else:
            shutil.rmtree(workspace)
