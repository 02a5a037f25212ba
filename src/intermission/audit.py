"""The audit trail's records: who did what to a session, through which surface, when, why.

Records are data below the surfaces. Whoever acts on a session (HITL, graph approvals,
expiries, effects, a person resolving an effect by hand) *notes* an :class:`AuditEntry` on
the session with :func:`note`; the store that saves the session writes the noted entries in
the same transaction as the save, stamps them with its own clock, numbers them and chains
them by hash (:class:`AuditRecord`). What was refused changes no session, so a surface that
refuses a decision writes its entry straight to the store (``store.append_audit``).

Noted entries are transient: they are not part of the session's snapshot (a refused decision
leaves the snapshot exactly as it was) and a copy of a session does not carry them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from ._model import Model
from .core import listeners
from .core.listeners import LISTENERS

__all__ = ["AuditEntry", "AuditRecord", "Via", "forget_noted", "note", "noted"]

Via = Literal["api", "cli", "notebook", "agui", "console", "system"]
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


class AuditRecord(AuditEntry):
    """An entry as a store keeps it: numbered per session, stamped by the store's clock and
    chained: ``hash`` covers the record and ``prev``, the hash of the record before it (for
    a fork's first record, its parent's head)."""

    session_id: str
    seq: int
    at_ms: float
    prev: str
    hash: str


def note(session: Any, entry: AuditEntry) -> None:
    """Note ``entry`` on ``session``: its store writes it with the session's next save."""
    noted: list[AuditEntry] | None = getattr(session, "audit_noted", None)
    if noted is None:
        noted = []
        session.audit_noted = noted
    noted.append(entry)
    if LISTENERS:
        listeners.noted(session, entry)


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
