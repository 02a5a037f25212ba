"""The audit trail's records: who did what to a session, through which surface, when, why.

Records are data below the surfaces. Whoever acts on a session (HITL, graph approvals,
expiries, effects, a person resolving an effect by hand) *notes* an :class:`AuditEntry` on
the session with :func:`note`; the store that saves the session writes the noted entries in
the same transaction as the save, stamps them with its own clock, numbers them and chains
them by hash (:class:`AuditRecord`). What was refused changes no session, so a surface that
refuses a decision writes its entry straight to the store (``store.append_audit``).

Noted entries are transient: they are not part of the session's snapshot (a refused decision
leaves the snapshot exactly as it was) and a copy of a session does not carry them.

The chain: ``hash = sha256(prev + canonical JSON of the record without hash)`` (keys sorted,
no spaces, UTF-8), where ``prev`` is the hash of the record before it, 64 zeros for the
first record of a chain, or, for a fork's first record, its parent's head when the fork was
stored. A store given an audit key (``INTERMISSION_AUDIT_KEY``, ``open_store(url,
audit_key=…)``) writes keyed records instead: ``hash = HMAC-SHA256(key, prev + text)``, and
the record says so (``"keyed": true`` in its text, so the MAC covers it too).

The session row keeps the head (the last record's number and hash), written in the same
transaction as the records. ``store.verify_audit(session_id)`` checks the chain, that it
ends at that head, and that every vote, decision and completed effect the session shows has
its record; it names the first broken record and what is missing. What it cannot see
without a key: someone with write access to the database who rewrites records *and*
recomputes their hashes and the head. With the key, such a rewrite is detected. Keep the
head (``python -m intermission audit ID --head``) somewhere else to catch a rewrite by
someone who also holds the key.

This module is data: it imports nothing of the core, the surfaces or the stores (the core
registers its listeners in :data:`NOTE_HOOKS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict, Field

from ._check import shown
from ._json import check_json
from ._model import Model
from .errors import UsageError

__all__ = [
    "AuditEntry",
    "AuditRecord",
    "AuditVerification",
    "KEYED_LIMIT",
    "NOTE_HOOKS",
    "Problem",
    "UNKEYED_LIMIT",
    "Via",
    "by_hand",
    "forget_noted",
    "note",
    "noted",
]

Via = Literal["api", "cli", "notebook", "agui", "console", "slack", "system"]
"""The surface an action came through (``system``: intermission itself, e.g. an expiry)."""


class AuditEntry(Model):
    """One action on a session, as its producer notes it (the store adds time and chain)."""

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    action: str
    """What happened, dotted: ``decision.recorded``, ``decision.refused``, ``task.expired``,
    ``task.escalated``, ``task.warned``, ``effect.started``, ``effect.finished``,
    ``effect.resolved``, ``effect.forgotten``, ``session.forked`` …"""
    actor: str | None = None
    """The principal's name (None: nobody, e.g. a timeout)."""
    roles: list[str] = Field(default_factory=list)
    via: Via | None = None
    authenticated: bool = False
    """True when a surface authenticated the actor; False for a name asserted by a caller."""
    target: str | None = None
    """What it was done to: a call UUID, an approval id, an effect key."""
    reason: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    """Anything else worth keeping (JSON): the verdict, edited arguments, the policy state."""


def _false(value: Any) -> bool:
    return value is False


class AuditRecord(AuditEntry):
    """An audit entry as a store keeps it: numbered, timestamped and hash-chained.

    Numbered per session, stamped by the store's clock and chained: ``hash`` covers the
    record and ``prev``, the hash of the record before it (for a fork's first record, its
    parent's head)."""

    session_id: str
    seq: int
    at_ms: float
    prev: str
    hash: str
    keyed: bool = Field(default=False, exclude_if=_false)
    """True: ``hash`` is an HMAC-SHA256 under the store's audit key (absent when False, so
    records written without a key keep the text and hash they always had)."""


NOTE_HOOKS: list[Callable[[Any, AuditEntry], None]] = []
"""Called with ``(session, entry)`` for each noted entry (the core's listeners register
here, so that this module needs nothing above it)."""


def note(session: Any, entry: AuditEntry) -> None:
    """Note ``entry`` on ``session``: its store writes it with the session's next save.
    Its ``detail`` must be JSON (NotSerializableError here, not at the save)."""
    if not isinstance(entry, AuditEntry) or isinstance(entry, AuditRecord):
        raise UsageError(f"note takes an AuditEntry, not {type(entry).__name__}")
    check_json("audit detail", entry.detail)
    noted: list[AuditEntry] | None = getattr(session, "audit_noted", None)
    if noted is None:
        noted = []
        session.audit_noted = noted
    noted.append(entry)
    for hook in NOTE_HOOKS:
        hook(session, entry)


def noted(session: Any) -> list[AuditEntry]:
    """The entries noted on ``session`` since its last save, oldest first (a copy). A store
    writes them inside the save's transaction and, once it committed, calls
    :func:`forget_noted`."""
    return list(getattr(session, "audit_noted", None) or ())


def forget_noted(session: Any, count: int) -> None:
    """Drop the first ``count`` noted entries (written by a save that committed)."""
    found: list[AuditEntry] | None = getattr(session, "audit_noted", None)
    if found:
        del found[:count]


def by_hand(
    action: str,
    target: str,
    principal: Any = None,
    *,
    via: Via | None = None,
    roles: Sequence[str] = (),
    reason: str | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    """The entry of something a person did by hand (resolving an effect, say).

    ``principal``: who: a name, or an object with ``name`` (and ``roles``,
    ``authenticated``), such as an authenticated principal; None when nobody said."""
    actor: str | None = None
    authenticated = False
    found_roles = list(roles)
    if isinstance(principal, str):
        actor = principal
    elif principal is not None:
        name = getattr(principal, "name", None)
        if not isinstance(name, str):
            raise UsageError(f"principal is a name or a principal, not {shown(principal)}")
        actor = name
        found_roles = [*found_roles, *getattr(principal, "roles", ())]
        authenticated = bool(getattr(principal, "authenticated", False))
    if actor is not None and not actor.strip():
        raise UsageError("principal is a non-empty name")
    return AuditEntry(
        action=action,
        actor=actor,
        roles=sorted(set(found_roles)),
        via=via or "api",
        authenticated=authenticated,
        target=target,
        reason=reason,
        detail=detail or {},
    )


Problem = Literal[
    "edited", "hash", "missing", "chain", "unreadable", "head", "incomplete", "unkeyed", "keyed"
]
"""What broke an audit trail: ``edited`` (a record's content no longer matches its hash),
``hash`` (a hash was changed, the content is intact), ``missing`` (a record was deleted),
``chain`` (a record does not follow the one before it: one was inserted, replaced,
renumbered or moved), ``unreadable`` (not a record at all), ``head`` (the chain does not end
at the head the session row keeps: its newest records were deleted, or records were
added by hand), ``incomplete`` (a vote, decision or completed effect the session shows has
no record), ``unkeyed`` (the store has an audit key and a record was written without it),
``keyed`` (a keyed record, checked without the key)."""

UNKEYED_LIMIT = (
    "not detectable without an audit key: a rewrite of records by someone with write "
    "access to the database who also recomputes their hashes and the session's head "
    "(set INTERMISSION_AUDIT_KEY, or keep the head elsewhere: audit ID --head)"
)
"""What a check without a key cannot see, in words (``AuditVerification.limits``)."""

KEYED_LIMIT = (
    "not detectable even with the audit key: the newest records deleted together with the "
    "session's head set back to an earlier record (the database as it was before them; "
    "compare audit ID --head with a copy kept elsewhere)"
)
"""What a check with the key cannot see: a rollback of the newest records and the head
(the head in the session row is the previous record's hash, which anyone can read)."""


@dataclass(frozen=True, slots=True)
class AuditVerification:
    """What ``store.verify_audit(session_id)`` found.

    True when the trail is intact: the chain, its end at the session's head, and a record
    for every vote, decision and completed effect the session shows.

    Example:
        >>> AuditVerification("s-1", records=3, head="ab" * 32)
        AuditVerification('s-1': 3 records, chain intact; head abababababab…)
    """

    session_id: str
    records: int
    """How many records are stored for the session."""
    head: str | None
    """The hash of the last record (None: no records). Keep it elsewhere: a chain rewritten
    from some record on, or cut short, no longer ends in it."""
    broken_seq: int | None = None
    """The first broken record (for ``missing``: the number of the deleted one; None when
    no one record is to blame, e.g. ``incomplete``)."""
    problem: Problem | None = None
    why: str = ""
    """What is wrong with it, in words."""
    keyed: bool = False
    """True when the records were checked with the store's audit key (HMAC-SHA256)."""
    missing: tuple[str, ...] = field(default=())
    """What the session shows without a record (``incomplete``), one phrase each."""
    limits: str = ""
    """What this check could not detect (:data:`UNKEYED_LIMIT`, or :data:`KEYED_LIMIT` when
    checked with a key)."""

    @property
    def ok(self) -> bool:
        """True when every record is intact and in its place, and none is missing."""
        return self.problem is None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            head = f"; head {self.head}" if self.head else ""
            return f"{self.records} records, chain intact{head}"
        if self.broken_seq is None:
            return self.why
        return f"record {self.broken_seq}: {self.why}"

    def __repr__(self) -> str:
        if self.ok:
            head = f"; head {self.head[:12]}…" if self.head else ""
            return (
                f"AuditVerification({self.session_id!r}: {self.records} records, "
                f"chain intact{head})"
            )
        return f"AuditVerification({self.session_id!r}: {self.problem} at {self.broken_seq})"
