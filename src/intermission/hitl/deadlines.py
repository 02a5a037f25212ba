"""Deadlines of decisions (R23b): a decision after its deadline is refused with
DeadlinePassedError and changes nothing; the expired task stays visible until the next
resume rejects it (reviewer ``system:deadline``).

The clock: deadlines are epoch milliseconds of ONE clock, ``session.clock``. It stamps a
tool task's deadline when the call is proposed, judges a decision (HITL.submit,
decide_graph) and expires the task at resume — so a task refused as late is always
rejected by the next resume. The agent's ``.clock(...)`` stamps events only. A graph
approval's deadline is whatever its node wrote to ``approval.deadline`` (the change graph
uses ``session.clock`` too). ``session.clock`` is the wall clock
(:class:`~intermission.SystemClock`) unless the session was made with another; a session
loaded or claimed from a store has the store's clock (``store.clock``: PostgreSQL's own,
the local clock for SQLite and memory), so every process sharing the store judges a
deadline alike, whatever its own clock says. Tests inject a
:class:`~intermission.FakeClock` into the session or the store, or pass ``now_ms``.
"""

from __future__ import annotations

from .. import _check
from ..core.session import AgentSession
from ..decisions import HITLState, HITLTask
from ..errors import DeadlinePassedError, UsageError
from .approval_keys import ApprovalKeys, approval_deadline, checked_keys, decided_in_time

__all__ = ["check_deadline", "check_task_deadline", "now_of"]


def now_of(session: AgentSession, now_ms: float | None = None) -> float:
    """The time a decision is judged at: ``now_ms``, else the session's clock."""
    _check.number("now_ms", now_ms, 0, 1e15, optional=True)
    return float(session.clock.now_ms()) if now_ms is None else float(now_ms)


def check_task_deadline(session: AgentSession, task: HITLTask, now_ms: float) -> None:
    """Refuse a decision on ``task`` at ``now_ms`` when its binding deadline has passed."""
    deadline = task.decide_by_ms
    if deadline is not None and now_ms >= deadline:
        raise DeadlinePassedError(
            session.session_id, deadline, now_ms, call_uuid=task.call_uuid,
            what=f"tool call {task.tool_name} ({task.call_uuid})",
        )  # fmt: skip


def check_deadline(
    session: AgentSession,
    call_uuid: str | None = None,
    *,
    keys: ApprovalKeys | None = None,
    now_ms: float | None = None,
) -> None:
    """Raise DeadlinePassedError when a decision now would come too late.

    It judges a decision on the tool call ``call_uuid``, or (without one) on any undecided
    task of the suspended batch, or on the graph approval (its ``keys.deadline``). A task or
    approval already decided in time is not late. Changes nothing; see the module docstring
    for the clock."""
    _check.text("call_uuid", call_uuid, optional=True)
    keys = checked_keys(keys)
    state = getattr(session, "hitl", None)
    if not isinstance(state, HITLState):
        raise UsageError(f"check_deadline takes a session, not {type(session).__name__}")
    now = now_of(session, now_ms)
    for task in state.tasks:
        if call_uuid is not None and task.call_uuid != call_uuid:
            continue
        if task.call_uuid not in state.decisions:
            check_task_deadline(session, task, now)
    if call_uuid is None and not state.tasks:
        deadline = approval_deadline(session, keys)
        late = deadline is not None and now >= deadline
        if late and deadline is not None and not decided_in_time(session, deadline, keys):
            raise DeadlinePassedError(session.session_id, deadline, now, approval=keys.decision)
