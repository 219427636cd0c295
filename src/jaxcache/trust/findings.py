"""Results of an audit: findings, writers and the verdict, as frozen data."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, NamedTuple, Self

from jaxcache.text import Tone, safe
from jaxcache.trust.kernel.access import Action
from jaxcache.trust.kernel.principals import Principal, Trust

# the codes other modules ask about by name (a sealed audit found trusted keys to judge with:
# trust/judgement/sealed_view.py says it, lifecycle/admission.py and decide/ look for it)
SEAL_KEYS = "seal.keys"


class Verdict(StrEnum):
    PRIVATE = "PRIVATE"
    SHARED_BY_POLICY = "SHARED-BY-POLICY"
    UNSAFE = "UNSAFE"
    UNVERIFIABLE = "UNVERIFIABLE"
    SEALED = "SEALED"  # others may write, but readers load only entries trusted keys signed

    @property
    def ok(self) -> bool:
        return self in (Verdict.PRIVATE, Verdict.SHARED_BY_POLICY, Verdict.SEALED)

    @property
    def tone(self) -> Tone:
        return Tone.GOOD if self.ok else Tone.BAD if self is Verdict.UNSAFE else Tone.UNSURE


def trusted(value: object) -> bool:
    """A verdict as a document carries it (its text): one `Verdict.ok` accepts. Anything else,
    an unknown word included, is not trusted."""
    try:
        return isinstance(value, str) and Verdict(value).ok
    except ValueError:
        return False


# how much of the entries an audit looked at, and why not less (trust/judgement/shortcut.py:
# an audit through the memo of the last judgement that passed)
class Judged(StrEnum):
    """How much of the entries an audit looked at."""

    FULL = "full"  # every entry
    CHANGED = "changed"  # the listing, each name's lstat; only new or changed entries judged
    UNCHANGED = "unchanged"  # none: the directory is as remembered


class Why(StrEnum):
    """Why an audit did not take a shorter way (closed: tests name each)."""

    NONE = "nothing was left out that the argument does not cover"
    NOT_ASKED = "no memo was asked for (not a plain, local directory judged for you)"
    SMALL = "too few entries for a memo to pay"
    NO_MEMO = "nothing remembered (first audit, or the memo is missing, unprotected or odd)"
    OTHER_USER = "remembered for another user"
    OTHER_BOOT = "remembered before this machine last started"
    OTHER_DIRECTORY = "the path leads to another directory than the one remembered"
    OTHER_MOUNT = "the directory is on another mount than the one remembered"
    MOUNT_INSIDE = "something is mounted in the directory"
    OTHER_CONTEXT = "judged then for another build, policy or origin rule"
    LEDGER = "the origin ledger was replaced, shortened or moved, or has new lines that may " \
             "vouch for entries remembered as of unknown origin"
    DIRECTORY_CHANGED = "a name in the directory, or the directory itself, changed"
    UNSETTLED = "the directory changed just before it was remembered"
    EXPIRED = "remembered more than an hour ago"
    UNINSPECTED = "some processes could not be inspected for handles when remembered"
    OPEN_DIRECTORY = "others may look names up in the directory (search bit or ACL)"
    ORIGIN_REQUIRED = "entries of unknown origin are refused here: bytes you rewrote in " \
                      "place must be found"
    RELISTED_DIRECTORY = "a directory appeared in the cache directory"
    REFUSED = "the shorter judgement did not pass: judged in full for the final word"


class Effect(StrEnum):
    """What a finding does to the verdict; its word is what documents and reports say."""

    UNSAFE = "unsafe"
    UNVERIFIABLE = "unverifiable"
    WARNING = "warning"
    NOTE = "note"

    def __str__(self) -> str:
        return self.value

    @property
    def fails(self) -> bool:
        """It makes the verdict UNSAFE or UNVERIFIABLE: nothing may trust the directory."""
        return self in (Effect.UNSAFE, Effect.UNVERIFIABLE)

    @property
    def sarif_level(self) -> str:
        return "error" if self.fails else self.value


UNSAFE, UNVERIFIABLE, WARNING, NOTE = Effect.UNSAFE, Effect.UNVERIFIABLE, Effect.WARNING, \
    Effect.NOTE


class Finding(NamedTuple):
    code: str  # stable identifier, documented in docs/reference/finding-codes.md
    effect: Effect
    message: str
    path: str | None = None
    remedy: str | None = None


class _WriterFields(NamedTuple):
    principal: Principal
    action: Action
    target: str
    chain: tuple[str, ...]  # [reason, consequence], as text for people (escaped)
    trust: Trust


class Writer(_WriterFields):
    """A principal able to change what JAX loads from the cache, and the chain of reasons.

    The chain names files a writer chose the names of: it is given raw and escaped here, once
    (text.safe), so every finding, refusal and format that shows it shows it safe, none
    escapes it again, and no producer has to remember. `target` stays the path, for matching."""

    __slots__ = ()

    def __new__(cls, principal: Principal, action: Action, target: str, chain: tuple[str, ...],
                trust: Trust) -> Self:
        return super().__new__(cls, principal, action, target, tuple(safe(c) for c in chain),
                               trust)

    @classmethod  # (mypy sees a NamedTuple's _make as a generic function; it is this)
    def _make(cls, iterable: Iterable[Any]) -> Self:  # type: ignore[override]
        """A new writer from raw fields: its chain escaped."""
        return cls(*iterable)

    def _replace(self, **changes: Any) -> Self:
        """These fields changed: a `chain` given is raw and escaped here; one kept is not
        escaped again."""
        fields = []
        for name, value in zip(self._fields, self, strict=True):
            if name in changes:
                given = changes.pop(name)
                value = tuple(safe(c) for c in given) if name == "chain" else given
            fields.append(value)
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return tuple.__new__(type(self), fields)

    def with_reason(self, reason: str, trust: Trust) -> Self:
        """This writer with one more reason (raw, escaped here) after its chain, and its trust
        as judged now."""
        return tuple.__new__(type(self), (*self[:3], (*self.chain, safe(reason)), trust))

    def __reduce__(self) -> tuple[Any, ...]:  # a copy or a pickle keeps the chain as it is
        return (tuple.__new__, (type(self), tuple(self)))


class Component(NamedTuple):
    """One directory or symlink on the way to the cache, with its filesystem."""

    path: str
    kind: str
    owner: str
    group: str
    mode: int
    acl: tuple[str, ...]
    default_acl: tuple[str, ...]
    target: str | None
    fs_type: str | None
    fs_category: str | None
    mount_point: str | None
    bind_of: str | None
    read_only: bool
