"""Ledger entries of ``session.once``: exactly-once external effects (R32), and the rule that
keeps the ledger moving forward whatever copy of a session writes it (R39)."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Literal

from pydantic import ConfigDict, Field

from .._json import canonical_dumps
from .._model import Model
from ..audit import AuditEntry
from ..decisions import EffectApproval

__all__ = [
    "BY_HAND",
    "FORGOTTEN",
    "LedgerEntry",
    "advances",
    "effect_audit",
    "new_attempt",
    "new_family",
    "new_generation",
]

FORGOTTEN = "forgotten by hand: the outcome was unknown; the next once() runs it again"
"""The ``error`` of an entry that ``forget_effect`` marked for another attempt."""

BY_HAND = ("effect.resolved", "effect.forgotten")
"""The audit actions of ledger changes made by a person."""

_ERROR_CHARS = 500
"""How much of an effect's error message its audit record keeps."""


def new_generation() -> str:
    """A fresh session generation: minted when a session is created or forked, kept by
    every copy, restore and save of that session. Effect ids are numbered within it, so
    a crashed request that proposes the same call again names the same effect, while a
    fork, or a new session saved under a deleted one's id, never does (R48)."""
    return "gen-" + os.urandom(8).hex()


def new_family() -> str:
    """A fresh ledger family: the generation a session's effects belong to (R48).

    Minted by intermission when a session is created (or forked with a ledger of its own),
    never taken from a session id: a new session saved under the id of a deleted one is
    another generation and inherits none of its effects. 64 random bits, with a prefix no
    id minted before families existed carries.
    """
    return "family-" + os.urandom(8).hex()


def new_attempt() -> str:
    """A fresh attempt token: which run of an effect an entry belongs to."""
    return os.urandom(6).hex()


class LedgerEntry(Model):
    """One idempotency key: ``started`` before the effect, then ``completed`` or ``failed``.

    An entry left at ``started`` means the process died mid-effect: its outcome is unknown.
    ``attempt`` names the run of the effect the entry belongs to: a ``started`` entry only
    ends with its own attempt, and a retry after a failure starts a new one.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    status: Literal["started", "completed", "failed", "skipped"]
    result: Any = None
    error: str | None = None
    started_ms: float
    ended_ms: float | None = None
    attempt: str | None = None
    """None only in entries written before attempts were recorded."""
    by: str | None = None
    """The session that ran the effect (a fork reusing it shows where it ran)."""
    approval: EffectApproval | None = Field(default=None, exclude_if=lambda v: v is None)
    """The approval that authorised this attempt (R60), recorded with its start: its
    policy judges who may resolve or forget the effect when its outcome is unknown. None
    for an effect nobody had to approve (a plain ``session.once``)."""

    def completed(self, result: Any, now_ms: float) -> LedgerEntry:
        """This entry, completed with ``result``."""
        return self.model_copy(update={"status": "completed", "result": result, "ended_ms": now_ms})

    def failed(self, error: str, now_ms: float) -> LedgerEntry:
        """This entry, failed with ``error`` (a later ``once`` runs the effect again)."""
        return self.model_copy(update={"status": "failed", "error": error, "ended_ms": now_ms})


def advances(old: LedgerEntry | None, new: LedgerEntry) -> bool:
    """True when writing ``new`` over ``old`` moves the ledger forward (R39).

    Forward means: anything over nothing; a ``started`` entry ends (completed or failed)
    only with its own attempt; a failed attempt is followed by a new ``started`` one; a
    completed entry is final. Everything else comes from a stale copy (a session loaded
    before the effect moved on) and is not written: ``completed`` and ``started`` are never
    rolled back. ``resolve_effect`` and ``forget_effect`` are explicit human overrides and
    do not pass through here.
    """
    if old is None or old.status == "skipped":  # (skipped: only in a dry-run fork's own)
        return True
    if old == new or old.status == "completed":
        return False
    if old.status == "started":
        return new.status != "started" and new.attempt == old.attempt
    return new.status == "started" and new.attempt != old.attempt


def effect_audit(key: str, entry: LedgerEntry, who: AuditEntry | None = None) -> AuditEntry | None:
    """The audit entry of writing ``entry`` for effect ``key``: ``effect.started`` /
    ``effect.finished`` with its status, attempt, the start of its error and a digest of
    its result, never the result itself (a result may be large or personal; the ledger
    keeps it) — or ``who``, the entry of a change by hand, with those facts added. None
    for a dry run's skip (nothing ran)."""
    if entry.status == "skipped":
        return None
    detail: dict[str, Any] = {"status": entry.status}
    if entry.attempt is not None:
        detail["attempt"] = entry.attempt
    if entry.by is not None:
        detail["by"] = entry.by
    if entry.approval is not None:  # which approval authorised it (R60)
        detail["approval"] = entry.approval.call_uuid
    if entry.error is not None:
        detail["error"] = entry.error[:_ERROR_CHARS]
    if entry.status == "completed":
        result = canonical_dumps(entry.result).encode("utf-8")
        detail["result_sha256"] = hashlib.sha256(result).hexdigest()
    if who is not None:
        return who.model_copy(update={"detail": {**detail, **who.detail}})
    action = "effect.started" if entry.status == "started" else "effect.finished"
    if entry.error == FORGOTTEN:
        action = "effect.forgotten"
    return AuditEntry(action=action, via="system", target=key, detail=detail)
