"""Each process's fingerprint in a run record: written from the probe's document, read back typed.

Writing (`of_probe`, in jaxcache's own process after the job): the probe records the fingerprint
`jaxcache run` handed the job when it speaks of the jaxlib the process loaded, with the
backend's facts (probe/document.py `fingerprint`). Where it does not (a job that runs another
Python than jaxcache's), the probe records the package folders the process loaded, and they are
hashed here, through the same memo as `jaxcache run` (fingerprint/memo.py): on the same host
only, since the CPU and the files are this host's. Anything else is "not known", with why.

Reading: records/process_facts.py (apart, so that `jaxcache run`, which only writes, does not
import it).
"""

from __future__ import annotations

import os

from jaxcache import validate
from jaxcache.fingerprint.model import Accelerator, Fingerprint
from jaxcache.text import safe

TYPE_CHECKING = False  # for type checkers only: importing typing costs `jaxcache run` ~2.5 ms
if TYPE_CHECKING:
    from typing import Any

NO_PROBE = "the process left no final probe document (killed, or it never compiled)"


def _accelerator(doc: object) -> Accelerator | None:
    if not isinstance(doc, dict):
        return None
    return Accelerator(*(str(doc.get(k) or "")[:256 if k != "platform_version" else 8192]
                         for k in ("platform", "platform_version", "device_kind",
                                   "compute_capability")))


def _roots(value: object) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in value or ()
            if isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)] \
        if isinstance(value, list) else []


def of_probe(probe: dict[str, Any]) -> tuple[dict[str, object] | None, str | None]:
    """(the record's `fingerprint` document, None) or (None, why it is not known)."""
    found = probe.get("fingerprint")
    if not isinstance(found, dict):
        return None, NO_PROBE
    host = (probe.get("identity") or {}).get("host")
    here = os.uname().nodename
    if host != here:
        return None, (f"the process ran on host {safe(str(host))}, not on {safe(here)} where "
                      "jaxcache ran: its build and CPU were not seen")
    accel = _accelerator(found.get("accelerator"))
    given = found.get("given")
    if given is not None:
        from jaxcache.fingerprint import handed, with_known_id

        mine = handed(given)  # the very one this process handed the job: no parse
        if mine is not None:
            return mine.with_accelerator(accel).to_json(), None
        try:
            fp = Fingerprint.from_json(given, "the fingerprint handed to the job")
        except validate.Invalid as exc:
            return None, f"the fingerprint handed to the job is malformed: {exc}"
        return with_known_id(fp).with_accelerator(accel).to_json(), None
    roots = _roots(found.get("roots"))
    if not any(name == "jaxlib" for name, _ in roots):
        return None, "the process loaded no jaxlib the probe could name"
    from jaxcache.fingerprint import binaries, cpu, memo

    kept = memo.load()
    build = binaries.build(roots, kept)
    memo.save(kept)
    fp = Fingerprint(build, cpu.machine(), cpu.read(), accel)
    return fp.to_json(), None


def record_fields(probe: dict[str, Any] | None) -> dict[str, object]:
    """`fingerprint` and `fingerprint_unknown` of one process entry of a record."""
    doc, why = of_probe(probe) if probe is not None else (None, NO_PROBE)
    return {"fingerprint": doc, "fingerprint_unknown": why}
