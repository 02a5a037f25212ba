"""The deadlines of approvals with a policy: warnings before them, escalations and expiries
at them — recorded in the session when they fall due.

Nothing runs when a deadline passes, so whoever meets the session next records what fell
due by then: a decision (``HITL.submit``, ``decide_graph``), a resume (the interceptor,
the approval node's ``expire_approval``), or the deadline sweeper, which claims each stored
session whose next due time (``due_ms``, a column of its row) has passed
(:func:`intermission.stores.sweep_deadlines`). Each is an event in the session's log with
a kind of its own (``approval_warned``, ``approval_escalated``, ``approval_expired``) and an
audit entry (``task.warned``, ``task.escalated``, ``task.expired``). An expiry records the
policy's ``on_expire`` as the decision, timed out, with no responder; the next resume
applies it.

Time is the session's clock (see :mod:`intermission.hitl.deadlines`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..audit import AuditEntry, note
from ..core.events_log import RunScope
from ..decisions import DecisionRecord, HITLTask
from ..events import ApprovalEscalatedEvent, ApprovalExpiredEvent, ApprovalWarnedEvent
from .approval_keys import ApprovalKeys, graph_ask, keys_of, write_decision
from .policy import Ask, Progress, allowed_roles

__all__ = [
    "Step",
    "apply_deadlines",
    "apply_graph_deadlines",
    "apply_task_deadlines",
    "due_ms",
    "next_due",
    "progress_of",
    "steps",
    "task_ask",
]

Emit = Callable[..., Any]

TIMED_OUT_APPROVE = "Approved by default: nobody decided before the deadline."
TIMED_OUT_REJECT = "Rejected: nobody decided before the deadline."


@dataclass(frozen=True)
class Step:
    """One thing that fell due: a warning before ``deadline_ms``, an escalation (to
    ``roles``, until the new ``deadline_ms``), or the expiry at ``deadline_ms``."""

    kind: Literal["warn", "escalate", "expire"]
    deadline_ms: float
    roles: tuple[str, ...] = ()
    resolution: Literal["reject", "approve"] = "reject"


def steps(ask: Ask, now_ms: float) -> list[Step]:
    """What fell due by ``now_ms``, in order (a late sweep may find several at once)."""
    policy = ask.policy
    out: list[Step] = []
    deadline = ask.deadline_ms
    escalated = ask.escalated_ms is not None
    warned = ask.warned_ms
    if policy.expires_after_ms is None:
        return out
    while deadline is not None:
        warn = policy.warn_before_ms
        if warn is not None and warned != deadline and now_ms >= deadline - warn:
            if now_ms < deadline:  # (past the deadline a warning says nothing any more)
                roles = allowed_roles(policy, escalated)
                out.append(Step("warn", deadline, tuple(sorted(roles or ()))))
            warned = deadline
        if now_ms < deadline:
            break
        esc = policy.escalation
        if esc is not None and not escalated:
            escalated = True
            deadline = deadline + esc.after_ms
            out.append(Step("escalate", deadline, tuple(sorted(esc.roles))))
            continue
        resolution: Literal["reject", "approve"] = (
            "approve" if policy.on_expire == "approve" else "reject"
        )
        out.append(Step("expire", deadline, resolution=resolution))
        break
    return out


def next_due(ask: Ask) -> float | None:
    """When the next step falls due (a warning, an escalation, the expiry), or None."""
    policy = ask.policy
    deadline = ask.deadline_ms
    if policy.expires_after_ms is None or deadline is None:
        return None
    warn = policy.warn_before_ms
    if warn is not None and ask.warned_ms != deadline:
        return deadline - warn
    return deadline


def task_ask(task: HITLTask) -> Ask | None:
    """A tool task's policy state, or None when it has no policy."""
    if task.policy is None:
        return None
    return Ask(
        policy=task.policy, requester=task.requester, votes=task.votes,
        deadline_ms=task.deadline_ms, escalated_ms=task.escalated_ms, warned_ms=task.warned_ms,
        what=f"tool call {task.tool_name} ({task.call_uuid})",
    )  # fmt: skip


def _scope_emit(session: Any, emit: Emit | None) -> Emit:
    if emit is not None:
        return emit
    scope = RunScope(f"deadline-{session.events.next_seq}", session.agent or "", session)
    return scope.emit


def _note(session: Any, step: Step, target: str, tool: str | None) -> None:
    action = {"warn": "task.warned", "escalate": "task.escalated", "expire": "task.expired"}
    detail: dict[str, Any] = {"deadline_ms": step.deadline_ms}
    if step.roles:
        detail["roles"] = list(step.roles)
    if step.kind == "expire":
        detail["resolution"] = step.resolution
    if tool:
        detail["tool"] = tool
    note(session, AuditEntry(action=action[step.kind], via="system", target=target,
                             detail=detail))  # fmt: skip


def _emit_step(emit: Emit, step: Step, target: str, tool: str | None) -> None:
    if step.kind == "warn":
        emit(ApprovalWarnedEvent, target=target, tool_name=tool, deadline_ms=step.deadline_ms,
             roles=list(step.roles))  # fmt: skip
    elif step.kind == "escalate":
        emit(ApprovalEscalatedEvent, target=target, tool_name=tool, roles=list(step.roles),
             deadline_ms=step.deadline_ms)  # fmt: skip
    else:
        emit(ApprovalExpiredEvent, target=target, tool_name=tool, resolution=step.resolution,
             deadline_ms=step.deadline_ms)  # fmt: skip


def apply_task_deadlines(session: Any, now_ms: float, emit: Emit | None = None) -> bool:
    """Record what fell due by ``now_ms`` on the undecided tool tasks with a policy;
    True when anything was recorded. ``emit``: the running request's (a resume), else
    the events are logged apart."""
    state = session.hitl
    changed = False
    for i, task in enumerate(state.tasks):
        ask = task_ask(task)
        if ask is None or task.call_uuid in state.decisions:
            continue
        due = steps(ask, now_ms)
        if not due:
            continue
        emit = _scope_emit(session, emit)
        updates: dict[str, Any] = {}
        for step in due:
            _emit_step(emit, step, task.call_uuid, task.tool_name)
            _note(session, step, task.call_uuid, task.tool_name)
            if step.kind == "warn":
                updates["warned_ms"] = step.deadline_ms
            elif step.kind == "escalate":
                updates["escalated_ms"] = now_ms
                updates["deadline_ms"] = step.deadline_ms
            else:
                approve = step.resolution == "approve"
                state.decisions[task.call_uuid] = DecisionRecord(
                    call_uuid=task.call_uuid, tool_name=task.tool_name,
                    verdict="approve" if approve else "reject",
                    comment=TIMED_OUT_APPROVE if approve else TIMED_OUT_REJECT,
                    time_ms=now_ms, fingerprint=task.fingerprint, via="system",
                    timed_out=True, votes=list(task.votes),
                )  # fmt: skip
        state.tasks[i] = task.model_copy(update=updates)
        changed = True
    return changed


def apply_graph_deadlines(
    session: Any, keys: ApprovalKeys, now_ms: float, emit: Emit | None = None
) -> bool:
    """Record what fell due by ``now_ms`` on the session's graph approval (one opened
    with a policy, not decided yet); True when anything was recorded."""
    ctx = session.context
    if ctx.get(keys.decision) is not None or not session.is_pending:
        return False
    ask = graph_ask(session, keys)
    if ask is None:
        return False
    due = steps(ask, now_ms)
    if not due:
        return False
    emit = _scope_emit(session, emit)
    for step in due:
        _emit_step(emit, step, keys.decision, None)
        _note(session, step, keys.decision, None)
        if step.kind == "warn":
            ctx.put(keys.warned, int(step.deadline_ms))
        elif step.kind == "escalate":
            ctx.put(keys.escalated, int(now_ms))
            ctx.put(keys.deadline, int(step.deadline_ms))
        else:
            approve = step.resolution == "approve"
            write_decision(
                session, keys, "APPROVE" if approve else "REJECT", None,
                None if approve else TIMED_OUT_REJECT, TIMED_OUT_APPROVE if approve else None,
                now_ms, timed_out=True,
            )  # fmt: skip
    return True


def apply_deadlines(session: Any, now_ms: float | None = None, emit: Emit | None = None) -> bool:
    """Record everything that fell due on the session's approvals with a policy (tool
    tasks and the graph approval); True when anything was recorded."""
    now = float(session.clock.now_ms()) if now_ms is None else float(now_ms)
    changed = apply_task_deadlines(session, now, emit)
    keys = keys_of(session.hitl.approval_keys)
    if keys is not None and not session.hitl.tasks:
        changed = apply_graph_deadlines(session, keys, now, emit) or changed
    return changed


def due_ms(session: Any) -> float | None:
    """When the session's next deadline step falls due (None: nothing scheduled). What a
    store keeps in the session row for the sweeper; sessions without a policy cost a scan
    of their tasks."""
    state = session.hitl
    found: list[float] = []
    for task in state.tasks:
        if task.policy is None or task.call_uuid in state.decisions:
            continue
        ask = task_ask(task)
        due = next_due(ask) if ask is not None else None
        if due is not None:
            found.append(due)
    if state.approval_keys is not None and not state.tasks and session.is_pending:
        keys = keys_of(state.approval_keys)
        if keys is not None and session.context.get(keys.decision) is None:
            try:
                ask = graph_ask(session, keys)
            except Exception:  # (a hand-edited context): nothing to schedule
                ask = None
            due = next_due(ask) if ask is not None else None
            if due is not None:
                found.append(due)
    return min(found) if found else None


def progress_of(
    session: Any, call_uuid: str | None = None, now_ms: float | None = None
) -> Progress | None:
    """Where an undecided approval with a policy stands (the tool call ``call_uuid``, or
    the session's graph approval), or None (no such approval, or it has no policy).
    ``now_ms``: judge escalation by then (a deadline passed that nobody recorded yet)."""
    if call_uuid is not None:
        for task in session.hitl.tasks:
            if task.call_uuid == call_uuid and task.policy is not None:
                ask = task_ask(task)
                assert ask is not None
                return _progress(ask, call_uuid, task.tool_name, now_ms)
        return None
    keys = keys_of(session.hitl.approval_keys) or ApprovalKeys()
    try:
        ask = graph_ask(session, keys)
    except Exception:
        return None
    return None if ask is None else _progress(ask, keys.decision, None, now_ms)


def _progress(ask: Ask, target: str, tool: str | None, now_ms: float | None) -> Progress:
    escalated = ask.escalated_at(now_ms)
    return Progress(
        target=target, policy=ask.policy, votes=list(ask.votes),
        roles=allowed_roles(ask.policy, escalated), requester=ask.requester,
        deadline_ms=ask.last_deadline(), escalated=escalated, tool_name=tool,
    )  # fmt: skip
