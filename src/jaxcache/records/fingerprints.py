"""Each process's fingerprint in a run record: written from the probe's document, read back typed.

Writing (`of_probe`, in jaxcache's own process after the job): the probe records the fingerprint
`jaxcache run` handed the job when it speaks of the jaxlib the process loaded, with the
backend's facts (probe/document.py `fingerprint`). Where it does not (a job that runs another
Python than jaxcache's), the probe records the package folders the process loaded, and they are
hashed here, through the same memo as `jaxcache run` (fingerprint/memo.py): on the same host
only, since the CPU and the files are this host's. Anything else is "not known", with why.

Reading: records/run_document.py's ProcessFacts.
"""

from __future__ import annotations

import os

from jaxcache import validate
from jaxcache.fingerprint.model import Fingerprint
from jaxcache.text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from jaxcache.records.probe_output import ProbeOutput

NO_PROBE = "the process left no final probe document (killed, or it never compiled)"


def of_probe(probe: ProbeOutput) -> tuple[dict[str, object] | None, str | None]:
    """(the record's `fingerprint` document, None) or (None, why it is not known)."""
    found = probe.fingerprint
    if found is None:
        return None, NO_PROBE
    here = os.uname().nodename
    if probe.host != here:
        return None, (f"the process ran on host {safe(str(probe.host))}, not on {safe(here)} "
                      "where jaxcache ran: its build and CPU were not seen")
    if found.given is not None:
        from jaxcache.fingerprint import handed, with_known_id

        mine = handed(found.given)  # the very one this process handed the job: no parse
        if mine is not None:
            return mine.with_accelerator(found.accelerator).to_json(), None
        try:
            fp = Fingerprint.from_json(found.given, "the fingerprint handed to the job")
        except validate.Invalid as exc:
            return None, f"the fingerprint handed to the job is malformed: {exc}"
        return with_known_id(fp).with_accelerator(found.accelerator).to_json(), None
    if not any(name == "jaxlib" for name, _ in found.roots):
        return None, "the process loaded no jaxlib the probe could name"
    from jaxcache.fingerprint import binaries, cpu, memo

    kept = memo.load()
    build = binaries.build(list(found.roots), kept)
    memo.save(kept)
    fp = Fingerprint(build, cpu.machine(), cpu.read(), found.accelerator)
    return fp.to_json(), None


def record_fields(probe: ProbeOutput | None) -> dict[str, object]:
    """`fingerprint` and `fingerprint_unknown` of one process entry of a record."""
    doc, why = of_probe(probe) if probe is not None else (None, NO_PROBE)
    return {"fingerprint": doc, "fingerprint_unknown": why}
