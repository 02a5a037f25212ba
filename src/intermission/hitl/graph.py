"""Graph approvals: write a human decision into the session context (the seed's
``approval.decision`` keys) with the same checks as tool decisions (R23, R23c, R35)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .. import _check
from .._check import shown
from ..core.events_log import RunScope
from ..core.session import AgentSession
from ..errors import (
    DeadlinePassedError,
    DecisionConflictError,
    InvalidDecisionError,
    ReviewerNotAllowedError,
    UsageError,
)
from ..events import ApprovalDecidedEvent
from ..traces import TeamTrace

__all__ = [
    "DEADLINE_REVIEWER",
    "ApprovalKeys",
    "approval_deadline",
    "checked_keys",
    "decide_graph",
    "decided_in_time",
    "expire_approval",
    "open_approval",
]

DEADLINE_REVIEWER = "system:deadline"
"""The reviewer of the rejection a resume records for a task or approval past its deadline."""


@dataclass(frozen=True, slots=True)
class ApprovalKeys:
    """Context keys a graph approval writes (names configurable, defaults from the seed)."""

    decision: str = "approval.decision"
    operator: str = "approval.operator"
    time: str = "approval.time"
    reason: str = "approval.reason"
    comment: str = "approval.comment"
    request: str = "approval.request"
    deadline: str = "approval.deadline"
    """Epoch ms after which a decision is refused (written by the approval node, optional)."""
    asked_in: str = "approval.asked_in"
    """The request (its team run id) this approval belongs to, written by
    :func:`open_approval`: a decision of an earlier request is never reused by a later one."""


def checked_keys(keys: ApprovalKeys | None) -> ApprovalKeys:
    """``keys`` (None: the defaults), or UsageError for anything else."""
    if keys is None:
        return ApprovalKeys()
    if not isinstance(keys, ApprovalKeys):
        raise UsageError(f"keys is an ApprovalKeys, not {type(keys).__name__}")
    return keys


def _context_of(session: AgentSession) -> Any:
    ctx = getattr(session, "context", None)
    if ctx is None or not callable(getattr(ctx, "get", None)):
        raise UsageError(f"a graph approval lives in a session, not {type(session).__name__}")
    return ctx


def approval_deadline(session: AgentSession, keys: ApprovalKeys = ApprovalKeys()) -> float | None:
    """The deadline of the session's graph approval (``keys.deadline``, epoch ms), or None
    when its node set none (anything but a finite number counts as none)."""
    value = _context_of(session).get(checked_keys(keys).deadline)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def decided_in_time(
    session: AgentSession, deadline: float, keys: ApprovalKeys = ApprovalKeys()
) -> bool:
    """True when the approval holds a decision recorded before ``deadline``: its
    ``keys.time`` (written by decide_graph) is a number below it. A decision key written
    without a time (``context.put``) has no proof it came in time."""
    ctx = _context_of(session)
    if ctx.get(keys.decision) is None:
        return False
    time = ctx.get(keys.time)
    in_time = not isinstance(time, bool) and isinstance(time, (int, float)) and time < deadline
    return bool(in_time)


def open_approval(session: AgentSession, keys: ApprovalKeys = ApprovalKeys()) -> bool:
    """For an approval node, before it reads the decision: a decision belongs to the request
    that asked for it. When the keys hold one from an earlier request of the session (a new
    prompt since), they are cleared — decision, reviewer, time, reason, comment, request and
    deadline — so this request asks again; returns True then. The context's
    ``keys.asked_in`` records the request. Outside a team run it changes nothing."""
    ctx = _context_of(session)
    keys = checked_keys(keys)
    trace = TeamTrace.current(ctx)
    if trace is None or not trace.run_id:
        return False
    asked = ctx.get(keys.asked_in)
    stale = asked is not None and asked != trace.run_id
    if stale:
        for key in (keys.decision, keys.operator, keys.time, keys.reason, keys.comment,
                    keys.request, keys.deadline):  # fmt: skip
            ctx.remove(key)
    ctx.put(keys.asked_in, trace.run_id)
    return stale


def expire_approval(
    session: AgentSession, keys: ApprovalKeys = ApprovalKeys(), now_ms: float | None = None
) -> bool:
    """For an approval node on resume: when the deadline passed and no decision was
    recorded before it (``keys.time`` below the deadline — a decision key written late or
    with no time does not count), record ``REJECT`` by ``system:deadline`` (with an
    ApprovalDecidedEvent, replacing any late decision) and return True; the node then
    routes as for any rejection. Time: ``now_ms``, else the session's clock."""
    keys = checked_keys(keys)
    _check.number("now_ms", now_ms, 0, 1e15, optional=True)
    deadline = approval_deadline(session, keys)
    if deadline is None or decided_in_time(session, deadline, keys):
        return False
    now = float(session.clock.now_ms()) if now_ms is None else float(now_ms)
    if now < deadline:
        return False
    reason = "Rejected: the approval deadline passed."
    session.context.remove(keys.comment)  # a late writer's comment is not the verdict's
    _write(session, keys, "REJECT", DEADLINE_REVIEWER, reason, None, now)
    return True


def _write(
    session: AgentSession,
    keys: ApprovalKeys,
    verdict: Literal["APPROVE", "REJECT"],
    reviewer: str | None,
    reason: str | None,
    comment: str | None,
    now: float,
) -> None:
    ctx = session.context
    ctx.put(keys.decision, verdict)
    ctx.put(keys.operator, reviewer)
    ctx.put(keys.time, int(now))
    if reason is not None:
        ctx.put(keys.reason, reason)
    if comment:
        ctx.put(keys.comment, comment)
    # the timeline shows who decided, and why, next to the run it resumes (R47)
    scope = RunScope(f"decision-{session.events.next_seq}", session.agent or "", session)
    scope.emit(
        ApprovalDecidedEvent, verdict=verdict, reviewer=reviewer, reason=reason, comment=comment
    )


def decide_graph(
    session: AgentSession,
    verdict: Literal["APPROVE", "REJECT"],
    *,
    reviewer: str | None = None,
    reason: str | None = None,
    comment: str | None = None,
    keys: ApprovalKeys = ApprovalKeys(),
    approvers: Iterable[str] | Callable[[str | None], bool] | None = None,
) -> None:
    """Record a graph approval: ``APPROVE`` or ``REJECT``, who and when. Resume afterwards
    with an empty prompt. Refused (typed error, nothing written) when the session is not
    waiting, waits for tool approvals instead, or ``approvers`` does not allow
    ``reviewer``. The first decision wins (R39): the same verdict again changes nothing;
    the other one raises DecisionConflictError naming who decided and when. After the
    approval's deadline (``keys.deadline``, judged by the session's clock) a decision
    raises DeadlinePassedError (see :mod:`intermission.hitl.deadlines`)."""
    if not isinstance(verdict, str) or verdict not in ("APPROVE", "REJECT"):
        raise InvalidDecisionError(f"a graph decision is APPROVE or REJECT, not {shown(verdict)}")
    if not isinstance(keys, ApprovalKeys):
        raise UsageError(f"keys is an ApprovalKeys, not {type(keys).__name__}")
    if approvers is not None and not callable(approvers) and (
        isinstance(approvers, (str, bytes))
        or not isinstance(approvers, Iterable)
        or not all(isinstance(a, str) for a in approvers)
    ):
        raise UsageError(f"approvers are reviewer names or a function, not {shown(approvers)}")
    for name, value in (("reviewer", reviewer), ("reason", reason), ("comment", comment)):
        if value is not None and not isinstance(value, str):
            raise InvalidDecisionError(f"{name} is text, not {type(value).__name__}")
    ctx = session.context
    if not session.is_pending:
        raise InvalidDecisionError(f"session {session.session_id!r} is not waiting for a decision")
    tasks = session.hitl.tasks
    if tasks:
        # a decision key would be written and resumed on, while the run still waits for
        # the tool approvals: the click would seem to work and change nothing, or (once
        # someone approved the tools) run them against this very decision
        decided = [session.hitl.decisions[t.call_uuid] for t in tasks
                   if t.call_uuid in session.hitl.decisions]  # fmt: skip
        if len(decided) == len(tasks):
            first = decided[0]
            raise DecisionConflictError(
                session.session_id, "the tool approval", first.verdict, first.reviewer,
                first.time_ms, call_uuid=first.call_uuid,
            )  # fmt: skip
        raise InvalidDecisionError(
            f"session {session.session_id!r} waits for {len(tasks) - len(decided)} tool "
            "approval(s), not a graph decision: decide them with HITL.submit or HITLPanel"
        )
    if approvers is not None:
        allowed = approvers(reviewer) if callable(approvers) else reviewer in set(approvers)
        if not allowed:
            raise ReviewerNotAllowedError(f"reviewer {reviewer!r} may not decide this approval")
    now = float(session.clock.now_ms())
    deadline = approval_deadline(session, keys)
    late = deadline is not None and now >= deadline
    existing = ctx.get(keys.decision)
    if late and deadline is not None and not decided_in_time(session, deadline, keys):
        # refused, whatever a late ``context.put`` left in the decision key
        raise DeadlinePassedError(session.session_id, deadline, now, approval=keys.decision)
    if existing is not None:
        if existing == verdict:
            return
        time = ctx.get(keys.time)
        raise DecisionConflictError(
            session.session_id, "the approval", str(existing), ctx.get(keys.operator),
            float(time) if isinstance(time, (int, float)) else None,
        )  # fmt: skip
    _write(session, keys, verdict, reviewer, reason, comment, now)
