"""Ledger entries of ``session.once``: exactly-once external effects (R32), and the rule that
keeps the ledger moving forward whatever copy of a session writes it (R39)."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import ConfigDict

from .._model import Model

__all__ = ["FORGOTTEN", "LedgerEntry", "advances", "new_attempt", "new_family"]

FORGOTTEN = "forgotten by hand: the outcome was unknown; the next once() runs it again"
"""The ``error`` of an entry that ``forget_effect`` marked for another attempt."""


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
