"""Every finding code jaxcache reports, what it means, why it matters and what to do: one table.

A finding (trust/findings.py Finding) carries a stable `code`; its message and remedy say the
particulars of one case. This table says the code's general case once: `jaxcache
explain-finding CODE` prints it (report/finding_codes.py), the tables of codes of
docs/reference/finding-codes.md are written from it (scripts/finding_table.py), and
tests/trust/test_finding_codes.py holds it to the code (read with ast): every code a Finding is
made with is here, every code here is made somewhere, with an effect listed here.

`effects` are those a finding of the code can carry, worst first; `effect_detail` says when it is
which (empty when there is one). A sealed audit (docs/how-to/sealed-cache.md) turns what only a
plain reader must fear (writers, planted entries, unknown storage) into warnings: those codes list
`warning` too. `page` is the manual's page that tells more.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from jaxcache.trust.findings import NOTE, SEAL_KEYS, UNSAFE, UNVERIFIABLE, WARNING, Effect

SEALED = "; a warning in a sealed audit (readers load only signed entries)"
ORIGIN_EFFECT = ("a warning; unsafe under CI or with --require-origin (unless the policy's "
                 "restored_from names the source)")


@dataclass(frozen=True, slots=True)
class FindingCode:
    code: str  # family.name: writer.untrusted
    effects: tuple[Effect, ...]  # worst first
    effect_detail: str  # when it is which; "" with one effect
    meaning: str  # one line: what a finding of this code says
    why: str  # why it matters
    action: str  # what to do
    page: str  # docs/<page>: where the manual says more

    @property
    def family(self) -> str:
        return self.code.split(".", 1)[0]

    @property
    def effect_text(self) -> str:
        """The effect column of docs/reference/finding-codes.md: the word, or when it is which."""
        return self.effect_detail or " / ".join(e.value for e in self.effects)


def _c(code: str, effects: tuple[Effect, ...], meaning: str, why: str, action: str, *,
       detail: str = "", page: str = "reference/audit.md") -> FindingCode:
    return FindingCode(code, effects, detail, meaning, why, action, page)


_UNSAFE_S = (UNSAFE, WARNING)  # unsafe, a warning once sealed
_UNVERIFIABLE_S = (UNVERIFIABLE, WARNING)
_PRIVATE = "use a private cache (jaxcache init)"
_CHECK_FIRST = ("other jobs may rely on this access: check who uses it before changing any "
                "permission")
_CONTEXT = "context for the verdict: it changes nothing by itself"

# the codes other modules ask about by name (tests/trust/test_finding_codes.py holds each to
# the catalogue): the path could not be read; what the run record's `origin.findings` keeps
# of an audit (where the entries came from); and SEAL_KEYS, kept beside Finding (findings.py)
# so that the admission asks for it without this table
PATH_UNREADABLE = "path.unreadable"
ORIGIN_SAID = ("origin.unknown", "origin.changed", "origin.declared", "origin.ledger",
               "origin.other-build", "origin.build-unknown", "origin.trusted-writer",
               "origin.trusted-ledger", "origin.vouched")

CODES: tuple[FindingCode, ...] = (
    # --- who can write ----------------------------------------------------------------------
    _c("writer.untrusted", _UNSAFE_S,
       "a principal you have not declared can change what JAX loads, with its first reason chain",
       "every cache entry is compiled code JAX loads unchecked: whoever can write it, or replace "
       "a directory above it, chooses what your process runs",
       f"{_PRIVATE}; or, if the principal is a user or group meant to share the cache, declare "
       "it in a policy (trusted_users, trusted_groups: 'everyone', the other bits, can never "
       f"be declared); {_CHECK_FIRST}", detail="unsafe" + SEALED),
    _c("writer.unmapped", _UNVERIFIABLE_S,
       "an owner this user namespace does not map (shown as the overflow id) can write: who it is "
       "cannot be known from here",
       "the overflow id stands for root or any user of the host alike, so the writer set is not "
       "known",
       "map the owner into the namespace (podman --userns=keep-id), or vouch for the mount's "
       "storage in a policy (accepted_storage); otherwise use a private cache (jaxcache init)",
       detail="unverifiable" + SEALED),
    _c("dir.precreate", _UNSAFE_S,
       "the cache does not exist and others can create it first",
       "JAX uses a directory it finds, whoever made it: the first to create it owns it",
       "create the cache yourself in a directory only you can write: jaxcache init",
       detail="unsafe" + SEALED),
    _c("dir.sticky-preseed", _UNSAFE_S,
       "a sticky cache directory others can add names to; names who can",
       "the sticky bit stops them replacing your entries, but cache keys are computable: they can "
       "plant an entry your next program loads",
       f"{_PRIVATE}; {_CHECK_FIRST}", detail="unsafe" + SEALED),
    # --- entries ----------------------------------------------------------------------------
    _c("entry.symlink", _UNSAFE_S,
       "an entry is a symlink: JAX follows symlinks when reading and writing",
       "the link's target, wherever it is and whoever can write it, decides the compiled code",
       "find out who put it there before any job loads it; jaxcache never deletes it for you",
       detail="unsafe" + SEALED),
    _c("entry.not-regular", _UNSAFE_S,
       "an entry is not a regular file (a device, FIFO or socket)",
       "JAX never writes one: someone placed it, and reading it can hang or feed a job anything",
       "find out who put it there before any job loads it; jaxcache never deletes it for you",
       detail="unsafe" + SEALED),
    _c("entry.hard-link", (WARNING,),
       "an entry has other hard links: JAX never creates them",
       "its content is also reachable under another name; the inode's owner and mode still bound "
       "who can write it, so the writer set stays exact",
       "find out who linked it, and remove the other name if it is not meant to be there"),
    _c("entry.unexpected-dir", (WARNING,),
       "a directory in the cache that JAX does not create",
       "JAX never makes it: someone or something else writes into the cache",
       "find out who made it before any job runs; jaxcache never deletes it for you"),
    _c("entry.unexpected-name", (NOTE,),
       "a file whose name JAX does not write",
       "JAX does not load it, but something other than JAX writes into the cache",
       "nothing, if you know what wrote it; otherwise find out"),
    _c("entry.acl-unreadable", _UNVERIFIABLE_S,
       "an entry's ACL cannot be read",
       "an ACL can grant write to anyone: who can change the entry is not known (fail closed)",
       "audit as the entry's owner or as root", detail="unverifiable" + SEALED),
    _c("entries.unreadable", _UNVERIFIABLE_S,
       "the cache's entries cannot be listed",
       "an entry not seen is not judged: fail closed",
       "run the audit as the user who owns the cache", detail="unverifiable" + SEALED),
    # --- the path ---------------------------------------------------------------------------
    _c("path.url", _UNVERIFIABLE_S,
       "the cache is a gs:// or s3:// URL: its writers are decided by the service's access "
       "control, which jaxcache cannot read",
       "whoever can write the bucket and prefix decides what JAX loads, and that cannot be seen "
       "from here",
       "check who holds write on the bucket and prefix (service accounts and CI included); "
       "prefer a sealed cache (docs/how-to/buckets.md) or a private local one (jaxcache init)",
       detail="unverifiable; with --sealed and trusted keys, a warning", page="how-to/buckets.md"),
    _c("path.url-unsupported", (UNVERIFIABLE,),
       "a URL jaxcache cannot judge as a sealed bucket (an unknown scheme, or no bucket name)",
       "nothing can be said of who writes it: fail closed",
       "give a gs://BUCKET/PREFIX or s3://BUCKET/PREFIX URL, or a local path",
       page="how-to/buckets.md"),
    _c("path.unreadable", (UNVERIFIABLE,),
       "a directory on the path cannot be searched: the rest of the path cannot be judged",
       "what cannot be seen cannot be judged: fail closed",
       "run the audit as a user who can search every ancestor (or root)"),
    _c("path.changed", (UNVERIFIABLE,),
       "the path changed while it was being audited",
       "a path that moves under the audit may be being swapped: the answer would describe "
       "another directory",
       "audit again; if it keeps changing, find out what replaces it"),
    _c("path.tilde", (WARNING,),
       "the path starts with '~': JAX takes it literally (a folder named '~' under the current "
       "directory)",
       "the audit judges the literal folder, not the home directory you meant",
       "pass an absolute path; init, run and enable refuse a leading '~'"),
    _c("path.missing", (NOTE,),
       "the cache does not exist yet; judged by its nearest existing ancestor",
       "whoever can write that ancestor can create the cache first",
       "create it before any job runs (`jaxcache init PATH`, or the parent's owner where you "
       "may not write there)"),
    _c("path.relative", (NOTE,),
       "a relative path: JAX resolves it against the current directory",
       "jobs started in other directories use other caches", "pass an absolute path"),
    _c("path.symlink", (NOTE,),
       "a component of the path is a symlink",
       "the directories on both sides of the link are part of the trust boundary; JAX keys on "
       "<= 0.10.2 also include the path you pass",
       "nothing, if the link is yours; its owner can point it elsewhere"),
    _c("policy.through-link", (NOTE,),
       "the policy has a [[cache]] table for the path as you gave it, but that path goes through "
       "a symlink someone other than you and root could change: the table does not apply",
       "whoever can change the link would choose what the declaration applies to",
       "declare the directory itself (the remedy names it)"),
    # --- filesystems and storage ------------------------------------------------------------
    _c("fs.network", _UNVERIFIABLE_S,
       "the cache is on a network or FUSE filesystem: local permission bits do not bound writers",
       "an NFS client with AUTH_SYS chooses its own uid; a FUSE daemon serves what it likes",
       "use a private cache on a local disk (jaxcache init), or, if you control every client and "
       "server, accept the filesystem for this path in a policy",
       detail="unverifiable" + SEALED),
    _c("fs.network-accepted", (NOTE,),
       "the cache is on a network filesystem the policy accepts", _CONTEXT, "nothing"),
    _c("fs.tmpfs", (NOTE,), "the cache is on tmpfs: entries vanish at reboot",
       "a cache that is emptied at each boot saves nothing across boots",
       "nothing, if that is meant; otherwise put the cache on a disk"),
    _c("fs.overlay", (NOTE,),
       "the cache is on an overlay filesystem: whoever built its lower layers (the image) decided "
       "their contents", _CONTEXT, "nothing, if you trust the image"),
    _c("fs.bind", (NOTE,),
       "the cache is under a bind mount: the same directory is reachable under its source path",
       _CONTEXT, "nothing; audit the source path too if others use it"),
    _c("fs.read-only", (NOTE,),
       "the cache is on a read-only mount: JAX can read entries but will not write new ones",
       "a read-only cache saves only what it already holds",
       "nothing, if that is meant (a baked image); otherwise mount it writable"),
    _c("kernel.disagrees", _UNVERIFIABLE_S,
       "the permission model and the kernel disagree on whether you can write a directory",
       "something the model does not know (an LSM, a capability, an immutable flag, an idmapped "
       "mount) decides access: the writer set is not known",
       "inspect the directory by hand (lsattr, getfacl, mount options)",
       detail="unverifiable" + SEALED),
    _c("storage.overlay-layer", _UNSAFE_S,
       "an undeclared principal can write an overlay layer (or a directory or entry in it) below "
       "the cache",
       "writing a lower layer changes what the cache's directory holds, whatever its own "
       "permissions say",
       f"{_PRIVATE} on a plain local disk, or declare the principal in a policy",
       detail="unsafe" + SEALED),
    _c("storage.loop-backing", _UNSAFE_S,
       "an undeclared principal can write, rename or replace the image file behind a loop device",
       "whoever writes the image writes every file of the filesystem in it",
       f"{_PRIVATE} on a plain local disk, or declare the principal in a policy",
       detail="unsafe" + SEALED),
    _c("storage.device", _UNSAFE_S,
       "an undeclared principal can write a block device node that stores the path",
       "whoever writes the device's blocks writes every file on it",
       f"{_PRIVATE} on a disk only root can write, or declare the principal in a policy",
       detail="unsafe" + SEALED),
    _c("storage.bind-source", _UNSAFE_S,
       "an undeclared principal can rename or replace the source of a bind mount or a directory "
       "above it", "replacing the source changes what the mount shows at the next mount",
       f"{_PRIVATE}, or declare the principal in a policy", detail="unsafe" + SEALED),
    _c("storage.unknown", _UNVERIFIABLE_S,
       "the storage cannot be identified or judged (remote or unknown block driver, layer, image "
       "or bind source not visible here, deleted image, stacked too deep or in a cycle)",
       "what stores the cache bounds who can write it, and that is not known: fail closed",
       "if you know what stores the mount and that only trusted users write it, vouch for it in "
       "a policy (accepted_storage); otherwise use a private cache on a plain local disk",
       detail="unverifiable" + SEALED),
    _c("storage.device-group", (NOTE,),
       "a device node grants write to a group with no member users: not counted as a writer",
       "a user added to that group later could write the filesystem's blocks",
       "nothing now; audit again after group changes"),
    _c("storage.accepted", (NOTE,),
       "the policy vouches for this mount point's storage (accepted_storage): not judged",
       "the policy's word stands in for the audit of that storage", "nothing"),
    _c("storage.container-root", (NOTE,),
       "what the mount namespace hides about the root the audit was started in (a container's or "
       "chroot's /): trusted like the container host",
       "it holds the programs the audit and the job run: judging it from inside is not possible",
       "nothing; audit from the host to judge the container's storage"),
    # --- other processes --------------------------------------------------------------------
    _c("users.process", (WARNING, NOTE),
       "a process uses the cache (its cwd, an open file or JAX_COMPILATION_CACHE_DIR)",
       "another user's process using the cache shares it with you, whatever you meant",
       "nothing, if you know the process; otherwise find out who runs it",
       detail="a warning for other users' processes, a note for yours and root's"),
    _c("users.uninspected", (NOTE,),
       "processes that could not be read, so their use of the cache is unknown",
       "a user of the cache may be missed", "run as root to see every user of the cache"),
    _c("handle.write", _UNSAFE_S + (NOTE,),
       "a process holds a descriptor open for writing on the cache, a subdirectory or an entry",
       "permissions are checked only when a file is opened: it can rewrite what JAX loads, "
       "whatever they say now",
       "stop the process (ask its user, or as root), then audit again; if its user is meant to "
       "share the cache, declare them in a policy",
       detail="unsafe from an untrusted user, a note from a policy-trusted one" + SEALED),
    _c("handle.shared-map", _UNSAFE_S + (NOTE,),
       "a process holds a shared mapping of an entry that is or may become writable",
       "a mapping outlives its descriptor and writes through to the file",
       "stop the process (ask its user, or as root), then audit again",
       detail="unsafe from an untrusted user, a note from a policy-trusted one" + SEALED),
    _c("handle.uninspected", (WARNING,),
       "other users' processes could not be checked for write handles",
       "a handle opened while the cache was writable to them cannot be ruled out",
       "audit as root (sudo jaxcache audit DIR); a cache that was never shared cannot have one"),
    _c("handle.unchecked", (NOTE,),
       "--no-processes: write handles were not looked for", "a handle would not be seen",
       "audit without --no-processes"),
    # --- a sealed cache ---------------------------------------------------------------------
    _c(SEAL_KEYS, (NOTE,),
       "sealed: the trusted keys readers require (name, id, holder, state), and how many each "
       "entry needs", _CONTEXT, "nothing", page="reference/sealed-cache.md"),
    _c("seal.holder-undeclared", (UNSAFE,),
       "a trusted key is held by someone who is not declared (you, root, trusted_signers or "
       "trusted_users)",
       "holding a trusted key is writing: its holder can sign any code",
       "declare the holder in the policy, or stop trusting the key", page="how-to/sealed-cache.md"),
    _c("seal.key-expiring", (WARNING,),
       "a trusted key's not_after is within 30 days",
       "from then on readers reject what only it signed: jobs recompile",
       "rotate: make a new key, trust both, seal with the new one (docs/how-to/sealed-cache.md)",
       page="reference/sealed-cache.md"),
    _c("seal.key-expired", (WARNING,),
       "a trusted key's not_after has passed",
       "readers reject what only it signed (with trust_signing_time, signatures claiming an "
       "earlier time still count)", "rotate to a new key and reseal",
       page="reference/sealed-cache.md"),
    _c("seal.key-not-yet-valid", (WARNING,),
       "a trusted key's not_before is still ahead", "readers reject what it signs until then",
       "wait, or correct not_before in the policy", page="reference/sealed-cache.md"),
    _c("seal.key-revoked", (NOTE,),
       "keys the policy revokes (revoked_keys), by id: every signature by them is rejected",
       _CONTEXT, "nothing; reseal what only they signed", page="reference/sealed-cache.md"),
    _c("seal.identity-loose", (WARNING,),
       "a trusted CI identity admits any ref or any event (any_ref, any_event)",
       "a pull request's, another branch's or a pull_request_target job running the trusted "
       "workflow signs entries every reader loads", "pin the ref and the event that publish",
       page="how-to/keyless.md"),
    _c("seal.identity-revoked", (NOTE,),
       "CI identities the policy revokes (revoked_identities): every keyless signature whose "
       "certificate states them is rejected", _CONTEXT, "nothing; reseal what only they signed",
       page="how-to/keyless.md"),
    _c("seal.no-usable-key", (UNVERIFIABLE,),
       "the keys that may count now have fewer distinct holders than signatures_needed",
       "a sealed reader would reject every entry; run --sealed and enable(sealed=True) refuse "
       "to start", "trust more keys (or holders), or lower signatures_needed",
       page="reference/sealed-cache.md"),
    _c("bucket.iam-unchecked", (WARNING,),
       "not checked: who can create, overwrite or delete objects in the bucket",
       "trusted keys keep such writers from choosing your code, not from deleting entries or "
       "making jobs recompile",
       "check the bucket's write grants (the remedy names the command)", page="how-to/buckets.md"),
    # --- origins ----------------------------------------------------------------------------
    _c("origin.unknown", (UNSAFE, WARNING),
       "compiled entries no job jaxcache watched wrote (restored, copied, baked into an image, "
       "or written by JAX without jaxcache)",
       "they are as trustworthy as whoever could write their source, and nothing is known of the "
       "build that compiled them",
       "seal the cache where it is produced and read it with `jaxcache run --sealed` "
       "(docs/how-to/ci.md), or, if you trust the source, name it in the policy (restored_from)",
       detail=ORIGIN_EFFECT),
    _c("origin.changed", (UNSAFE, WARNING),
       "entries rewritten since a watched job wrote them (same name, other bytes)",
       "whoever rewrote them chose the code they hold",
       "seal the cache where it is produced, or name its source in the policy (restored_from)",
       detail=ORIGIN_EFFECT),
    _c("origin.declared", (NOTE,),
       "entries of unknown origin accepted because the policy's restored_from names their source",
       "the policy's word stands in for the ledger", "nothing"),
    _c("origin.trusted-writer", (UNSAFE, NOTE),
       "entries of unknown origin whose file a writer the policy trusts here owns: written by "
       "that writer, not in your origin ledger",
       "owning a file proves who wrote it, not that a job jaxcache watched compiled it; under CI "
       "or --require-origin that is not enough",
       "name the writer's ledger in the policy (trusted_ledgers): entries it vouches for count "
       "as known", detail="unsafe under CI or with --require-origin, a note otherwise"),
    _c("origin.vouched", (NOTE,),
       "entries a trusted writer's ledger (trusted_ledgers) vouches for, by whose ledger",
       "that writer's watched jobs wrote them: they count as known, checked by their bytes",
       "nothing"),
    _c("origin.trusted-ledger", (WARNING,),
       "a ledger trusted_ledgers names failed the trusted-input check (owned by someone the "
       "policy does not trust here, writable by others, missing, copied): it vouches for nothing",
       "a ledger others can write could vouch for their entries",
       "fix what the message says (the ledger and its folders written only by its trusted "
       "writer, readable by you), or remove it from trusted_ledgers"),
    _c("origin.ledger", (WARNING,),
       "the origin ledger is not a trusted input (e.g. others can write it): no entry counts as "
       "yours",
       "a ledger others can write could vouch for their entries",
       "fix what the message says (make the state directory yours alone), or move the ledger "
       "away: jobs you run with jaxcache start a new one"),
    _c("origin.other-boot", (NOTE,),
       "under CI, ledger lines written before this machine last started were left out",
       "a disk image or snapshot restored as the CI cache would carry them to the byte", "nothing"),
    _c("origin.ledger-lines", (NOTE,),
       "ledger lines that are not ledger lines (a torn write, an edit) were skipped",
       "the entries they named count as unknown", "nothing, unless someone edits the ledger"),
    _c("origin.other-build", (UNSAFE, WARNING),
       "entries of yours whose ledger line names another build of jaxlib (or another machine or "
       "CPU) than the one judging",
       "JAX's cache key leaves the build and CPU out: another build's code may crash or compute "
       "wrong on this one",
       "clear them, or keep one cache per fingerprint (jaxcache fingerprint)",
       detail="a warning; unsafe under CI or with --require-origin",
       page="reference/fingerprint.md"),
    _c("origin.build-unknown", (NOTE,),
       "entries of yours whose build could not be compared (an older jaxcache wrote their lines, "
       "or this Python has no jaxlib)", "a build mismatch cannot be ruled out",
       "judge from the Python that runs the jobs; if jaxlib was upgraded since, clear them",
       page="reference/fingerprint.md"),
    # --- jaxcache net -----------------------------------------------------------------------
    _c("net.coordinator-exposed", (UNSAFE,),
       "the coordination service will bind beyond loopback without authentication",
       "anyone who can reach the port can join the job and read and write its key-value store "
       "(and, with jax_share_binary_between_hosts, the executables the others load)",
       "bind to a private interface (JAX_COORDINATOR_BIND_ADDRESS), firewall the port to the "
       "job's hosts, and on JAX >= 0.11 configure mTLS", page="reference/net.md"),
    _c("net.listener-exposed", (UNSAFE,),
       "a JAX service listens beyond loopback, unauthenticated and unencrypted",
       "anyone who can reach it can talk to the job", "bind to a private interface, firewall the "
       "port, and on JAX >= 0.11 configure mTLS", page="reference/net.md"),
    _c("net.uninspected", (UNVERIFIABLE,),
       "--live: processes could not be inspected (counted per user), or /proc hides them",
       "any of them may be a JAX service listening beyond loopback: fail closed",
       "run as root (or as those users), or pass --partial to accept a partial answer",
       page="reference/net.md"),
    _c("net.partial", (WARNING,),
       "--live --partial: some processes could not be inspected, and that was accepted",
       "the answer covers only the processes inspected", "run as root for a whole answer",
       page="reference/net.md"),
    _c("net.mtls-ignored", (WARNING,),
       "JAX_MTLS_* set on a JAX without mTLS: the variables are ignored",
       "traffic is plaintext although the environment says otherwise",
       "upgrade JAX to a version with mTLS, or rely on network isolation", page="reference/net.md"),
    _c("net.coordinator", (NOTE,), "where the coordination service will listen, and with what "
       "protection", _CONTEXT, "nothing", page="reference/net.md"),
    _c("net.listener", (NOTE,), "a JAX service listening on loopback, or protected by mTLS",
       "other local users can still reach a loopback port", "nothing", page="reference/net.md"),
    _c("net.no-coordinator", (NOTE,), "no coordinator address in this environment", _CONTEXT,
       "nothing", page="reference/net.md"),
    _c("net.no-jax-process", (NOTE,), "no JAX process found to inspect", _CONTEXT, "nothing",
       page="reference/net.md"),
    _c("net.profiler", (NOTE,),
       "jax.profiler.start_server also listens on every interface, unauthenticated",
       "anyone who can reach it can read the profile",
       "start it only on trusted networks, and stop it when done", page="reference/net.md"),
    _c("net.not-covered", (NOTE,),
       "cache permissions do not cover the network services",
       "they are a trust boundary of their own, bounded only by network control and "
       "authentication", "nothing", page="reference/net.md"),
)

BY_CODE: dict[str, FindingCode] = {c.code: c for c in CODES}


def lookup(code: str) -> FindingCode | None:
    return BY_CODE.get(code)


def close_to(code: str) -> tuple[str, ...]:
    """Codes spelled like `code` (a typo, a missing family), best first."""
    near = difflib.get_close_matches(code, BY_CODE, n=3, cutoff=0.6)
    if not near:  # `untrusted` for writer.untrusted
        near = [c for c in BY_CODE if c.split(".", 1)[1] == code]
    return tuple(near)
