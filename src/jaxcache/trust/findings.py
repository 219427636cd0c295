"""Results of an audit: findings, writers and the verdict, as frozen data."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jaxcache.text import Tone, safe
from jaxcache.trust.kernel.access import Action
from jaxcache.trust.kernel.principals import Principal, Trust


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


@dataclass(frozen=True, slots=True)
class Finding:
    code: str  # stable identifier, documented in docs/audit.md
    effect: Effect
    message: str
    path: str | None = None
    remedy: str | None = None


@dataclass(frozen=True, slots=True)
class Writer:
    """A principal able to change what JAX loads from the cache, and the chain of reasons.

    The chain names files a writer chose the names of: it is given raw and escaped here, once
    (text.safe), so every finding, refusal and format that shows it shows it safe, none
    escapes it again, and no producer has to remember. `target` stays the path, for matching."""

    principal: Principal
    action: Action
    target: str
    chain: tuple[str, ...]  # [reason, consequence], as text for people (escaped)
    trust: Trust

    def __post_init__(self) -> None:  # (dataclasses.replace would escape it again)
        object.__setattr__(self, "chain", tuple(safe(c) for c in self.chain))


@dataclass(frozen=True, slots=True)
class Component:
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
