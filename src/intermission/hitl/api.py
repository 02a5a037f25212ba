"""HITL: look up pending tool calls and submit decisions by call UUID (R20–R23c).

Every check runs before anything changes: a refused decision leaves the session exactly as
it was (compare snapshots). Submitting does not resume; call ``agent.prompt().session(s)``.
Everything returned here is a copy (R42): editing a task's ``args`` changes nothing that
runs; the one way to change what runs is ``HITLDecision.approve().modified_args(...)``,
which is validated, recorded and fingerprinted. A decision after its task's deadline is
refused with DeadlinePassedError, judged by ``session.clock`` (the store's clock for a
session loaded from a store; see :mod:`intermission.hitl.deadlines`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .. import _check
from ..agents._base import check_owner
from ..agents.tools import Tool, ToolArgumentError, holder
from ..core.session import AgentSession
from ..decisions import DecisionRecord, HITLDecision, HITLState, HITLTask
from ..errors import (
    AmbiguousTaskError,
    DecisionConflictError,
    InvalidDecisionError,
    ReviewerNotAllowedError,
    UnknownTaskError,
    UsageError,
)
from .deadlines import check_task_deadline
from .interceptor import ApproverPolicy, HITLInterceptor

__all__ = ["HITL", "deciding_for"]

_DECIDING_FOR: ContextVar[Any] = ContextVar("intermission_deciding_for", default=None)


@contextmanager
def deciding_for(agent: Any, *, adopt: bool = False) -> Iterator[None]:
    """Within this block, a decision given no ``agent=`` is checked against ``agent``
    (decide_and_resume wraps its ``decide`` in it: the agent it resumes is at hand);
    ``adopt``: that agent takes the session over (see AgentRequest.adopt)."""
    token = _DECIDING_FOR.set((agent, adopt))
    try:
        yield
    finally:
        _DECIDING_FOR.reset(token)


def _state(session: Any) -> HITLState:
    state = getattr(session, "hitl", None)
    if not isinstance(state, HITLState):
        raise UsageError(
            f"HITL works on a session (InMemoryAgentSession), not {type(session).__name__}"
        )
    return state


def _holder(session: Any, task: HITLTask, agent: Any) -> Any:
    """The agent instance holding the tool that would run ``task``: ``agent`` (or its
    team member) when given, else the agent that last ran the session in this process
    (its trace knows it). Never a table of names: another agent built with the same
    names changes nothing here (R49)."""
    at_hand, adopting = _DECIDING_FOR.get() or (None, False)
    adopt = adopting and agent in (None, at_hand)  # (decide_and_resume(..., adopt=True))
    if agent is None:
        agent = at_hand
    if agent is not None and getattr(agent, "name", None) == session.agent:
        # the session's agent by name must be it by fingerprint too: another agent's
        # policy never judges this session's decisions (a refusal changes nothing)
        check_owner(session, agent, adopt=adopt)
    if agent is None:
        trace = getattr(session, "traces", {}).get(task.agent or "")
        agent = getattr(trace, "agent", None)
    return holder(agent, task.agent, task.tool_name)


def _tool_of(held: Any, task: HITLTask) -> Tool | None:
    return None if held is None else held.tools[task.tool_name]


def _approver_policy(held: Any, task: HITLTask) -> ApproverPolicy | None:
    """The callable approver policy of the holder's HITL interceptor for ``task``."""
    tool = _tool_of(held, task)
    for interceptor in getattr(held, "interceptors", ()):
        if isinstance(interceptor, HITLInterceptor):
            policy = interceptor.approver_policy(tool)
            if policy is not None:
                return policy
    return None


def _edited_args(task: HITLTask, merged: dict[str, Any], held: Any) -> dict[str, Any]:
    """The merged arguments as the tool takes them, checked against the schema the task
    carries (no agent needed); a task from before schemas travelled with their tasks is
    checked by the tool at hand."""
    if task.args_schema is not None:
        from .._schema import SchemaMismatch, conform

        try:
            fitted: dict[str, Any] = conform(merged, task.args_schema)
        except SchemaMismatch as exc:
            raise InvalidDecisionError(
                f"edited arguments for {task.tool_name!r} do not fit its schema: {exc}; "
                f"nothing was changed. Expected JSON schema: {_shown(task.args_schema)}",
                call_uuid=task.call_uuid,
            ) from None
        return fitted
    tool = _tool_of(held, task)
    if tool is None:
        raise InvalidDecisionError(
            f"cannot validate edited arguments: task {task.call_uuid!r} was proposed before "
            f"tasks carried their tool's schema, and no tool {task.tool_name!r} of agent "
            f"{task.agent!r} is at hand; pass the agent: HITL.submit(session, task, "
            "decision, agent=agent)",
            call_uuid=task.call_uuid,
        )
    try:
        return tool.validate(merged)
    except ToolArgumentError as exc:
        raise InvalidDecisionError(str(exc), call_uuid=task.call_uuid) from None


def _shown(schema: dict[str, Any]) -> str:
    import json

    text = json.dumps(schema, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 600 else text[:600] + "…"


class HITL:
    """Static helpers over a session's suspended tool batch (the seed's ``HITL``)."""

    @staticmethod
    def pending_tasks(session: AgentSession) -> list[HITLTask]:
        """The undecided tasks of the suspended batch (copies)."""
        decided = _state(session).decisions
        return [t.model_copy(deep=True) for t in session.hitl.tasks if t.call_uuid not in decided]

    @staticmethod
    def get_pending_task_by_call_uuid(session: AgentSession, call_uuid: str) -> HITLTask | None:
        """The undecided task with this call UUID, or None. The call UUID is the model's
        call id — with a suffix (``call_0.2``) when a reply repeated one (R48)."""
        _check.text("call_uuid", call_uuid)
        for task in HITL.pending_tasks(session):
            if task.call_uuid == call_uuid:
                return task
        return None

    @staticmethod
    def get_pending_task_by_tool_name(session: AgentSession, tool_name: str) -> HITLTask | None:
        """The undecided task of ``tool_name``; refused when several calls share the name."""
        _check.text("tool_name", tool_name)
        found = [t for t in HITL.pending_tasks(session) if t.tool_name == tool_name]
        if len(found) > 1:
            raise AmbiguousTaskError(
                f"{len(found)} pending calls of {tool_name!r} "
                f"({', '.join(t.call_uuid for t in found)}): look them up by call UUID"
            )
        return found[0] if found else None

    @staticmethod
    def expired_tasks(session: AgentSession, now_ms: float | None = None) -> list[HITLTask]:
        """Undecided tasks past their deadline (R23b): visible before anyone resumes; the
        interceptor's ``on_expire`` decides what the next resume does with them."""
        _check.number("now_ms", now_ms, 0, 1e15, optional=True)
        now = session.clock.now_ms() if now_ms is None else now_ms
        return [
            t
            for t in HITL.pending_tasks(session)
            if t.deadline_ms is not None and now >= t.deadline_ms
        ]

    @staticmethod
    def get_decision(session: AgentSession, call_uuid: str) -> DecisionRecord | None:
        """The decision recorded for ``call_uuid`` (not yet applied), or None (a copy)."""
        _check.text("call_uuid", call_uuid)
        record = _state(session).decisions.get(call_uuid)
        return None if record is None else record.model_copy(deep=True)

    @staticmethod
    def _check(
        session: AgentSession, task: HITLTask | str, decision: HITLDecision, agent: Any = None
    ) -> DecisionRecord:
        """Validate one decision against the session; returns the record, mutates nothing."""
        _state(session)
        if not isinstance(task, (str, HITLTask)):
            raise InvalidDecisionError(
                f"a task is an HITLTask or its call UUID, not {type(task).__name__}"
            )
        uuid = task if isinstance(task, str) else task.call_uuid
        if not isinstance(decision, HITLDecision):
            raise InvalidDecisionError("a decision is an HITLDecision", call_uuid=uuid)
        current = next((t for t in session.hitl.tasks if t.call_uuid == uuid), None)
        if current is None:
            raise UnknownTaskError(
                f"no pending task with call UUID {uuid!r} (unknown or already applied); "
                "see HITL.pending_tasks(session)",
                call_uuid=uuid,
            )
        if isinstance(task, HITLTask) and task.args != current.args:
            raise InvalidDecisionError(
                f"task {uuid!r} changed since it was read; read it again", call_uuid=uuid
            )
        reviewer = decision.reviewer_name
        allowed = current.approvers
        held = _holder(session, current, agent)
        policy = _approver_policy(held, current)
        if current.approver_policy and policy is None:
            # fail closed (R23c): who may decide is the agent's callable, and it is not here
            raise ReviewerNotAllowedError(
                f"who may decide {current.tool_name!r} is a policy of agent "
                f"{current.agent!r}, which is not at hand; pass the agent: "
                "HITL.submit(session, task, decision, agent=agent); nothing was changed",
                call_uuid=uuid,
            )
        if (allowed is not None and reviewer not in allowed) or (
            policy is not None and not policy(reviewer, current)
        ):
            raise ReviewerNotAllowedError(
                f"reviewer {reviewer!r} may not decide {current.tool_name!r}"
                + (f" (allowed: {', '.join(allowed)})" if allowed else ""),
                call_uuid=uuid,
            )
        modified = decision.edited_args
        if modified is not None:
            merged = _edited_args(current, {**current.args, **modified}, held)
            modified = {k: merged[k] for k in modified}
        existing = session.hitl.decisions.get(uuid)
        if existing is not None:
            # first writer wins (R39): the same decision again is a no-op (a retry, a second
            # reviewer agreeing); a different one is refused, naming the first
            if existing.verdict == decision.verdict and existing.modified_args == modified:
                return existing
            raise DecisionConflictError(
                session.session_id,
                f"tool call {current.tool_name} ({uuid})",
                existing.verdict + (" with edited arguments" if existing.modified_args else ""),
                existing.reviewer,
                existing.time_ms,
                call_uuid=uuid,
            )
        now = session.clock.now_ms()
        check_task_deadline(session, current, now)  # a late decision is refused (R23b)
        return DecisionRecord(
            call_uuid=uuid,
            tool_name=current.tool_name,
            verdict=decision.verdict,
            comment=decision.comment_text,
            modified_args=modified,
            always_allow=decision.always,
            reviewer=reviewer,
            time_ms=now,
            fingerprint=current.fingerprint,
        )

    @staticmethod
    def submit(
        session: AgentSession,
        task: HITLTask | str,
        decision: HITLDecision,
        *,
        agent: Any = None,
    ) -> DecisionRecord:
        """Record ``decision`` for ``task`` (a task or its call UUID); typed errors, no change
        on refusal. The first decision of a task wins: the same decision again changes
        nothing and returns the recorded one; a different one raises
        DecisionConflictError; a first one after the task's deadline raises
        DeadlinePassedError. Resume afterwards with an empty prompt.

        Edited arguments are validated, and a callable approver policy is read, from the
        agent instance (R49): ``agent``, else the one decide_and_resume resumes, else the
        agent that last ran the session in this process. A task whose approvers are such a
        policy is refused (ReviewerNotAllowedError) when none of them is at hand."""
        record = HITL._check(session, task, decision, agent)
        session.hitl.decisions.setdefault(record.call_uuid, record)
        return record.model_copy(deep=True)

    @staticmethod
    def submit_all(
        session: AgentSession, decisions: Mapping[str, HITLDecision], *, agent: Any = None
    ) -> list[DecisionRecord]:
        """Record several decisions by call UUID; all are checked before any is stored
        (``agent``: as for :meth:`submit`)."""
        if not isinstance(decisions, Mapping):
            raise InvalidDecisionError(
                f"submit_all takes a mapping of call UUIDs to decisions, not "
                f"{type(decisions).__name__}"
            )
        records = [HITL._check(session, uuid, d, agent) for uuid, d in decisions.items()]
        for record in records:
            session.hitl.decisions.setdefault(record.call_uuid, record)
        return [record.model_copy(deep=True) for record in records]

    @staticmethod
    def approve_all(
        session: AgentSession, reviewer: str | None = None, *, agent: Any = None
    ) -> list[DecisionRecord]:
        """Approve every task of the suspended batch (a task already rejected or skipped
        raises DecisionConflictError and nothing is recorded; ``agent``: as for
        :meth:`submit`)."""
        _check.text("reviewer", reviewer, optional=True)
        decision = HITLDecision.approve()
        if reviewer:
            decision = decision.reviewer(reviewer)
        return HITL.submit_all(
            session, {t.call_uuid: decision for t in session.hitl.tasks}, agent=agent
        )

    @staticmethod
    def reject_all(
        session: AgentSession,
        reason: str | None = None,
        reviewer: str | None = None,
        *,
        agent: Any = None,
    ) -> list[DecisionRecord]:
        """Reject every task of the suspended batch (a task already approved raises
        DecisionConflictError and nothing is recorded; ``agent``: as for :meth:`submit`)."""
        _check.text("reason", reason, optional=True)
        _check.text("reviewer", reviewer, optional=True)
        decision = HITLDecision.reject(reason)
        if reviewer:
            decision = decision.reviewer(reviewer)
        return HITL.submit_all(
            session, {t.call_uuid: decision for t in session.hitl.tasks}, agent=agent
        )

    @staticmethod
    def clear(session: AgentSession) -> None:
        """Forget the suspended batch and its decisions."""
        _state(session)
        session.hitl.tasks.clear()
        session.hitl.decisions.clear()
        session.hitl.expired.clear()
        session.hitl.agent = None
