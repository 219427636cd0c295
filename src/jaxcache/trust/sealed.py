"""How signatures change the audit of a sealed cache.

When every reader of a directory loads only entries signed by trusted keys, a writer of the
directory can delete entries or plant ones that are rejected (a denial of service: jobs
recompile), but can no longer choose the code a process runs. So writer, filesystem and entry
findings stop being UNSAFE and become warnings, and the verdict is SEALED, provided that each
key's holder is a declared writer (you, root, or trusted in the policy): signing is writing.
"""

from __future__ import annotations

from dataclasses import replace

from jaxcache.trust.findings import UNSAFE, UNVERIFIABLE, WARNING, Finding, Writer

# findings about who can write, or about a filesystem whose writers cannot be known
COVERED = ("writer.", "dir.", "entry.", "entries.unreadable", "fs.network", "kernel.disagrees",
           "users.process", "handle.", "storage.", "path.url")
NOTE_SUFFIX = (" — that holds for a plain reader; a sealed reader loads only signed entries, so "
               "such a writer can delete entries or plant ones that are rejected (jobs "
               "recompile) but cannot choose the code your process runs")
REMEDY = ("keep every reader sealed (jaxcache run --sealed, jaxcache.enable(sealed=True)); to "
          "spare the recompiles such writers can cause, restrict who can write, checking first "
          "who relies on that access")


def account(findings: list[Finding], writers: list[Writer], keys: tuple,
            holder_trust: dict[str, str]) -> tuple[list[Finding], bool]:
    """The findings as a sealed reader sees them, and whether sealing applies at all.

    keys: PublicKey objects; holder_trust: each policy-declared holder's trust class
    ("you", "root", "policy" or "untrusted"), keys passed in code have no holder.
    """
    if not keys:
        return findings, False
    out = []
    for f in findings:
        if f.effect in (UNSAFE, UNVERIFIABLE) and f.code.startswith(COVERED):
            out.append(replace(f, effect=WARNING, message=f.message + NOTE_SUFFIX,
                               remedy=REMEDY))
        else:
            out.append(f)
    for key in keys:
        if key.holder is not None and holder_trust.get(key.holder) == "untrusted":
            out.append(Finding(
                "seal.holder-undeclared", UNSAFE,
                f"trusted key {key.id} is held by {key.holder}, who is not a declared writer of "
                "this cache: whoever holds a trusted key can make every reader run their code",
                None, f"declare {key.holder} in trusted_users for this cache, or remove the key"))
    out.append(Finding(
        "seal.keys", "note",
        f"sealed: readers load only entries signed by {len(keys)} trusted key(s): "
        + ", ".join(f"{k.id} ({k.holder or 'given by the caller'})" for k in keys)
        + "; `jaxcache verify DIR` checks every entry", None))
    return out, True
