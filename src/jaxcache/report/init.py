"""`jaxcache init`'s formats: text when it made or accepted the directory (the path and the
ways to use it that audit it again) and when it refused (the answer, where to go instead, the
audit behind it); json (schema jaxcache.init/1): the audit it based itself on."""

from __future__ import annotations

import json
import re
import shlex
import stat

from jaxcache.documents.kinds import envelope
from jaxcache.report import audit, jsonout, style
from jaxcache.text import Tone, safe, wrap
from jaxcache.trust.create import InitResult


def render_text(result: InitResult, *, default_dir: str) -> str:
    """init succeeded: the path, and the ways to use it that audit it again before JAX loads
    anything (a bare JAX setting would trust whatever happens to the directory later)."""
    path = safe(result.path)
    what = "created" if result.created else "already private:"
    run = "jaxcache run" if result.path == default_dir else \
        f"jaxcache run --cache-dir {shlex.quote(path)}"
    last = result.report.components[-1] if result.report.components else None
    mode = f"{stat.S_IMODE(last.mode):04o}" if last is not None else "0700"
    note = result.readable()
    said = "".join(f"{line}\n" for line in wrap(f"note: {note}")) if note else ""
    return (f"{what} {path} (mode {mode}, verdict {result.report.verdict.value})\n{said}\n"
            "Use it; each way audits it again before JAX loads anything from it:\n"
            f"  {run} -- python train.py\n"
            "or in Python, right after `import jax`:\n"
            f"  jaxcache.enable({json.dumps(path)})\n")


_INIT_HINT = re.compile(r"\s*\(jaxcache init\)|: jaxcache init$")


def _for_init(remedy: str) -> str | None:
    """A finding's advice as said to someone whose init was just refused: advice that is only
    "run init" is dropped, a pointer to init inside other advice (which may matter: who else
    relies on this access) points to the location advised above instead."""
    if "`jaxcache init PATH`" in remedy:
        return None
    return _INIT_HINT.sub(" (another location: see above)", remedy)


def render_refused(result: InitResult, *, default_dir: str, detail: bool = True) -> str:
    """init refused PATH: the answer first, where to go instead, then the audit behind it."""
    path = safe(result.path)
    if result.path == default_dir:
        where = ("give a PATH under a directory only you and root can write (e.g. one in your "
                 "home directory with mode 0700): `jaxcache init PATH`")
    else:
        where = ("choose another location, under a parent only you and root can write: "
                 f"`jaxcache init` without PATH makes {safe(default_dir)}")
    lines = [f"{style.verdict('REFUSED', Tone.UNSURE)}: {path}: "
             f"{safe(result.refused or '')}; nothing was changed", *wrap(f"what to do: {where}")]
    text = "\n".join(lines) + "\n"
    if detail:
        text += "\n" + audit.render_text(result.report, remedy=_for_init)
    return text


def render_json(result: InitResult) -> str:
    """`jaxcache init --format json` (schema jaxcache.init/1): the audit it based itself on."""
    return jsonout.document({**envelope("init"), "path": result.path, "ok": result.ok,
                             "created": list(result.created), "refused": result.refused,
                             "note": result.readable(),
                             "audit": audit.audit_dict(result.report)})
