"""Forks: an independent session from a checkpoint of another (R44).

A fork is built as a snapshot — the checkpoint's state, the events logged up to it, the
history up to it — and restored: nothing of the parent is shared but, by default, its
ledger (an effect runs at most once in the family).

Families (R48): a ``shared`` fork joins its parent's family; a ``dry-run`` or ``separate``
fork starts a family of its own, minted here. A fork of a dry-run preview is a preview
too, whatever mode it asks for: the preview's ledger records skips, the real family's
effects never reach it, so a real session forked from it could run an effect its root
runs as well. Keeping every descendant of a preview a preview is what keeps "an effect
runs at most once among a root's descendants" true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .._json import canonical_dumps
from ..audit import AuditEntry, note
from ..errors import SessionStateError, UsageError
from .events_log import EventLog
from .history import Checkpoint
from .ledger import new_family, new_generation
from .session import check_session_id

if TYPE_CHECKING:
    from .session import InMemoryAgentSession

__all__ = ["EFFECTS", "fork_session"]

EFFECTS = ("shared", "dry-run", "separate")


def _pick(session: InMemoryAgentSession, at: Any) -> int:
    """The position in the kept history of checkpoint ``at`` (default: the latest)."""
    history = session._history
    if history.max == 0:
        raise SessionStateError(
            f"session {session.session_id!r} keeps no history (max_checkpoints=0): there is "
            "no checkpoint to fork from",
            session_id=session.session_id,
        )
    if not history.marks:
        raise SessionStateError(
            f"session {session.session_id!r} has no checkpoint to fork from yet: run it "
            "first (every request end takes one)",
            session_id=session.session_id,
        )
    if at is None:
        return len(history.marks) - 1
    index = at.index if isinstance(at, Checkpoint) else at
    if not isinstance(index, int) or isinstance(index, bool):
        raise UsageError(f"at is a checkpoint or its index, not {type(at).__name__}")
    position = index - history.first
    if not 0 <= position < len(history.marks):
        kept = f"{history.first}..{history.first + len(history.marks) - 1}"
        raise UsageError(f"no checkpoint {index} (this session keeps {kept})")
    return position


def fork_session(
    session: InMemoryAgentSession,
    new_session_id: str,
    at: Any,
    effects: Literal["shared", "dry-run", "separate"],
) -> InMemoryAgentSession:
    """See :meth:`InMemoryAgentSession.fork`."""
    from .session import InMemoryAgentSession

    check_session_id(new_session_id)
    if new_session_id == session.session_id:
        raise UsageError("a fork needs an id of its own")
    if effects not in EFFECTS:
        raise UsageError(f"effects is one of {EFFECTS}, not {effects!r}")
    if session.effects == "dry-run":
        effects = "dry-run"  # a fork of a preview is a preview (see the module docstring)
    position = _pick(session, at)
    history = session._history
    state = history.state_at(position)
    mark = history.marks[position]
    log = session.events
    forms = log.stored_forms()
    events = [form for form in forms if form["seq"] < mark.seq]
    # the log up to the checkpoint (what was dropped from a full log stays dropped); at
    # the newest checkpoint usually the whole log, whose text the parent keeps
    events_json = log.stored_json() if len(events) == len(forms) else canonical_dumps(events)
    kept = [m.data() for m in history.marks[: position + 1]]
    kept[-1].pop("back", None)  # the fork's state is the checkpoint's
    snapshot: dict[str, Any] = {
        "schema_version": 1,
        "session_id": new_session_id,
        **state,
        "max_events": log.max_events,
        "max_messages": session.max_messages,
        "next_seq": mark.seq,
        "history": {"marks": kept, "first": history.first, "max": history.max},
        "parent": {"id": session.session_id, "at": history.first + position},
    }
    # shared: the parent's family (its id, for a parent from before families were
    # minted); otherwise a generation of its own
    snapshot["family"] = session.ledger_id if effects == "shared" else new_family()
    snapshot["generation"] = new_generation()  # a fork's new proposals are its own effects
    if effects == "dry-run":
        snapshot["effects"] = "dry-run"
    # restored from its text: the fork's history reads its base state from that text,
    # lazily, instead of dumping the new session again; its events are the parent's
    # (validated there), kept as text until read and written in full by its first save
    fork = InMemoryAgentSession.restore(canonical_dumps(snapshot))
    fork.events = EventLog.from_stored(
        events_json, len(events), session_id=new_session_id, max_events=log.max_events,
        next_seq=mark.seq,
    )  # fmt: skip
    fork.events.mark_stored(-1, 0)
    fork.clock = session.clock
    if effects == "shared":
        # one ledger for the family: in memory the same entries, in a store the same rows
        fork.ledger = session.ledger
        fork.ledger_hook = session.ledger_hook
    elif effects == "dry-run":
        # what already ran is known (its recorded result is returned); what did not is
        # recorded as skipped in the fork's own ledger, never in the family's
        fork.ledger = dict(session.ledger)
        fork.ledger_dirty = set(fork.ledger)  # kept in the fork's own rows when saved
    # its audit chain starts from its parent's: the store links this first record to the
    # parent's head when it saves the fork
    detail = {"parent": session.session_id, "checkpoint": history.first + position}
    note(fork, AuditEntry(action="session.forked", target=session.session_id,
                          detail={**detail, "effects": effects}))  # fmt: skip
    return fork
