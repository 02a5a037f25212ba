"""HITL: look up pending tool calls and submit decisions by call UUID (R20–R23c).

Every check runs before anything changes: a refused decision leaves the session exactly as
it was (compare snapshots). Submitting does not resume; call ``agent.prompt().session(s)``.
Everything returned here is a copy (R42): editing a task's ``args`` changes nothing that
runs; the one way to change what runs is ``HITLDecision.approve().modified_args(...)``,
which is validated, recorded and fingerprinted. A decision after its task's deadline is
refused with DeadlinePassedError, judged by ``session.clock`` (the store's clock for a
session loaded from a store; see :mod:`intermission.hitl.deadlines`).

Who decides is a principal (``principal=``), else the decision's ``.reviewer()`` name as
asserted. The task's policy (``on_tool(name, policy=ApprovalPolicy(...))``) judges every
decision (see :mod:`intermission.hitl.policy`); without one, a rejection still needs a
reason. Under a quorum a decision is a vote: it is kept on the task, which stays pending
for the others, until the votes decide the outcome.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .. import _check
from ..agents._base import check_owner
from ..agents.tools import Tool, ToolArgumentError, holder
from ..audit import AuditEntry, note
from ..core.events_log import RunScope
from ..core.session import AgentSession
from ..decisions import DecisionRecord, HITLDecision, HITLState, HITLTask, Vote
from ..errors import (
    AmbiguousTaskError,
    DecisionConflictError,
    DecisionRefusedError,
    InvalidDecisionError,
    ReviewerNotAllowedError,
    UnknownTaskError,
    UsageError,
)
from ..events import ApprovalVotedEvent
from ..principals import Actor, Principal, actor_of, label, nameless_via, principal_name
from .deadlines import check_task_deadline
from .deciding import deciding_as, default_principal
from .interceptor import ApproverPolicy, HITLInterceptor
from .policy import Progress, allowed_roles, judge, progress_text, tally, vote_of
from .refusals import refusal
from .timeouts import apply_task_deadlines, progress_of, task_ask

__all__ = ["HITL", "deciding_as", "deciding_for"]

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


@dataclass(frozen=True)
class _Judged:
    """What a judged decision records: its outcome (``record``), or a vote on the task
    (``vote``; both when the vote decided the outcome); ``same``: the very decision was
    recorded already; ``timed``: its task has a policy (deadlines may have fallen due)."""

    uuid: str
    record: DecisionRecord | None = None
    vote: Vote | None = None
    same: bool = False
    timed: bool = False
    now: float = 0.0
    """The session's time it was judged at."""


def _expires(task: HITLTask) -> float | None:
    """When a task counts as expired: its deadline, or for a policy's its last one (an
    escalation keeps it open past the first)."""
    if task.policy is not None and task.policy.expires_after_ms is not None:
        return task.decide_by_ms
    return task.deadline_ms


def _uuid_of(task: Any) -> Any:
    return task.call_uuid if isinstance(task, HITLTask) else task


def _actor(decision: Any, principal: Principal | Actor | None) -> Actor | None:
    """Who decides: ``principal`` (vouched for by the caller; the decision's reviewer name
    becomes a display note), else the decision's reviewer name as asserted."""
    name = getattr(decision, "reviewer_name", None)
    principal = default_principal(principal)
    if principal is not None:
        return actor_of(principal, display=name)
    return Actor(name=principal_name(name), via="api") if name else None


def _noted(session: AgentSession, task: HITLTask, judged: _Judged) -> None:
    """The audit entry (and, for a vote that decided nothing yet, the event) of a
    recorded decision."""
    vote = judged.vote
    record = judged.record
    detail: dict[str, Any] = {"tool": task.tool_name}
    if record is None and vote is not None:
        ask = task_ask(task)
        assert ask is not None
        text = progress_text(ask.policy, task.votes,
                             roles=allowed_roles(ask.policy, task.escalated_ms is not None),
                             requester=task.requester)  # fmt: skip
        scope = RunScope(f"decision-{session.events.next_seq}", session.agent or "", session)
        scope.emit(ApprovalVotedEvent, target=task.call_uuid, tool_name=task.tool_name,
                   vote=vote, progress=text)  # fmt: skip
        detail.update(verdict=vote.verdict, vote=True, progress=text)
        if vote.modified_args is not None:
            detail["modified_args"] = vote.modified_args
        note(session, AuditEntry(
            action="decision.recorded", actor=vote.name, roles=list(vote.roles), via=vote.via,
            authenticated=vote.authenticated, target=task.call_uuid, reason=vote.comment,
            detail=detail,
        ))  # fmt: skip
        return
    assert record is not None
    detail["verdict"] = record.verdict
    if record.modified_args is not None:
        detail["modified_args"] = record.modified_args
    if record.votes:
        detail["votes"] = [v.name for v in record.votes]
    if record.display:
        detail["display"] = record.display
    note(session, AuditEntry(
        action="decision.recorded", actor=record.reviewer, roles=list(record.roles),
        via=record.via, authenticated=record.authenticated, target=record.call_uuid,
        reason=record.comment, detail=detail,
    ))  # fmt: skip


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
            t for t in HITL.pending_tasks(session) if (d := _expires(t)) is not None and now >= d
        ]

    @staticmethod
    def get_decision(session: AgentSession, call_uuid: str) -> DecisionRecord | None:
        """The decision recorded for ``call_uuid`` (not yet applied), or None (a copy)."""
        _check.text("call_uuid", call_uuid)
        record = _state(session).decisions.get(call_uuid)
        return None if record is None else record.model_copy(deep=True)

    @staticmethod
    def progress(
        session: AgentSession, call_uuid: str | None = None, now_ms: float | None = None
    ) -> Progress | None:
        """Where an undecided approval with a policy stands — votes so far, who may decide
        now, what is still needed (``.text``) — for the tool call ``call_uuid``, or
        without one for the session's graph approval; None when it has no policy."""
        _check.text("call_uuid", call_uuid, optional=True)
        _check.number("now_ms", now_ms, 0, 1e15, optional=True)
        return progress_of(session, call_uuid, now_ms)

    @staticmethod
    def _check(
        session: AgentSession,
        task: HITLTask | str,
        decision: HITLDecision,
        agent: Any = None,
        principal: Principal | Actor | None = None,
    ) -> DecisionRecord | Vote:
        """Validate one decision against the session: the record it would make (or its
        vote, under a quorum); mutates nothing."""
        judged = HITL._judge(session, task, decision, agent, _actor(decision, principal), None)
        return judged.record or judged.vote  # type: ignore[return-value]

    @staticmethod
    def _judge(
        session: AgentSession,
        task: HITLTask | str,
        decision: HITLDecision,
        agent: Any,
        actor: Actor | None,
        now: float | None,
    ) -> _Judged:
        """Judge one decision against the session (nothing changes): what to record."""
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
        reviewer = actor.name if actor is not None else None
        allowed = current.approvers
        held = _holder(session, current, agent)
        policy = _approver_policy(held, current)
        if current.approver_policy and policy is None:
            # fail closed (R23c): who may decide is the agent's callable, and it is not here
            raise ReviewerNotAllowedError(
                f"who may decide {current.tool_name!r} is a policy of agent "
                f"{current.agent!r}, which is not at hand; pass the agent: "
                "HITL.submit(session, task, decision, agent=agent); nothing was changed",
                call_uuid=uuid, rule="approvers", reviewer=reviewer,
                verdict=decision.verdict, session_id=session.session_id,
            )  # fmt: skip
        if (allowed is not None and reviewer not in allowed) or (
            policy is not None and not policy(reviewer, current)
        ):
            raise ReviewerNotAllowedError(
                f"reviewer {reviewer!r} may not decide {current.tool_name!r}"
                + (f" (allowed: {', '.join(allowed)})" if allowed else ""),
                call_uuid=uuid, rule="approvers", reviewer=reviewer,
                verdict=decision.verdict, session_id=session.session_id,
            )  # fmt: skip
        modified = decision.edited_args
        if modified is not None:
            merged = _edited_args(current, {**current.args, **modified}, held)
            modified = {k: merged[k] for k in modified}
        rules = current.policy
        existing = session.hitl.decisions.get(uuid)
        if existing is not None:
            if rules is not None and not existing.timed_out:
                roles = allowed_roles(rules, current.escalated_ms is not None)
                if roles is not None and not (actor is not None and roles & set(actor.roles)):
                    existing = None  # (refused below as not allowed, never a quiet no-op)
        if existing is not None:
            # first outcome wins (R39): the same decision again is a no-op (a retry, a
            # second reviewer agreeing); a different one is refused, naming the first. A
            # timeout is nobody's decision: one after it comes too late, whatever it says
            if (
                existing.verdict == decision.verdict
                and existing.modified_args == modified
                and not existing.timed_out
            ):
                return _Judged(uuid, record=existing, same=True, now=existing.time_ms)
            raise DecisionConflictError(
                session.session_id,
                f"tool call {current.tool_name} ({uuid})",
                existing.verdict + (" with edited arguments" if existing.modified_args else ""),
                label(existing.reviewer, existing.display)
                if not existing.timed_out
                else "the deadline",
                existing.time_ms,
                call_uuid=uuid,
            )
        now = session.clock.now_ms() if now is None else now
        ask = task_ask(current)
        if ask is None or ask.policy.expires_after_ms is None:
            check_task_deadline(session, current, now)  # a late decision is refused (R23b)
        reason = decision.comment_text
        if ask is None:
            if decision.verdict == "reject" and not (reason or "").strip():
                raise DecisionRefusedError(
                    f"rejecting tool call {current.tool_name} ({uuid}) of session "
                    f"{session.session_id!r} needs a reason: HITLDecision.reject(reason); "
                    "nothing was changed",
                    rule="reason_to_reject", reviewer=reviewer, verdict="reject",
                    session_id=session.session_id, call_uuid=uuid,
                )  # fmt: skip
        else:
            judge(
                ask, actor, decision.verdict, reason=reason, now_ms=now,
                session_id=session.session_id, call_uuid=uuid, modified_args=modified,
            )  # fmt: skip
        record = DecisionRecord(
            call_uuid=uuid,
            tool_name=current.tool_name,
            verdict=decision.verdict,
            comment=decision.comment_text,
            modified_args=modified,
            always_allow=decision.always,
            reviewer=reviewer,
            time_ms=now,
            fingerprint=current.fingerprint,
            roles=list(actor.roles) if actor is not None else [],
            via=actor.via if actor is not None else nameless_via(),
            authenticated=bool(actor is not None and actor.authenticated),
            display=actor.display if actor is not None else None,
        )
        if ask is None or (ask.policy.approvals == 1 and ask.policy.rejections == 1):
            return _Judged(uuid, record=record, timed=ask is not None, now=now)
        vote = vote_of(actor, decision.verdict, now, decision.comment_text, modified)
        votes = [*current.votes, vote]
        if tally(ask.policy, votes) is None:
            return _Judged(uuid, vote=vote, timed=True, now=now)
        return _Judged(uuid, record=record.model_copy(update={"votes": votes}), vote=vote,
                       timed=True, now=now)  # fmt: skip

    @staticmethod
    def _record(session: AgentSession, judged: list[_Judged], now: float) -> None:
        """Record judged decisions: what fell due first, then the votes and outcomes."""
        state = session.hitl
        if any(j.timed for j in judged):
            apply_task_deadlines(session, now)  # a warning or escalation due by now
        for j in judged:
            if j.same:
                continue
            index = next(i for i, t in enumerate(state.tasks) if t.call_uuid == j.uuid)
            task = state.tasks[index]
            if j.vote is not None:
                state.tasks[index] = task = task.model_copy(update={"votes": [*task.votes, j.vote]})
            if j.record is not None:
                state.decisions.setdefault(j.uuid, j.record)
            _noted(session, task, j)

    @staticmethod
    def submit(
        session: AgentSession,
        task: HITLTask | str,
        decision: HITLDecision,
        *,
        agent: Any = None,
        principal: Principal | Actor | None = None,
    ) -> DecisionRecord | Vote:
        """Record ``decision`` for ``task`` (a task or its call UUID); typed errors, no change
        on refusal. The first outcome of a task wins: the same decision again changes
        nothing and returns the recorded one; a different one raises
        DecisionConflictError; a first one after the task's deadline raises
        DeadlinePassedError. Resume afterwards with an empty prompt.

        ``principal``: who decides (a :class:`~intermission.Principal` the calling code
        vouches for; a ``.reviewer()`` name on the decision is then a display note); without
        one the ``.reviewer()`` name is recorded as asserted. The task's policy judges it
        (roles, not the requester, a reason to reject, once per principal): refused with
        ReviewerNotAllowedError or DecisionRefusedError. Under a quorum the decision is a
        vote: it returns the :class:`~intermission.Vote` while the task stays pending
        for the others, and the decision record once the votes decide it.

        Edited arguments are validated, and a callable approver policy is read, from the
        agent instance (R49): ``agent``, else the one decide_and_resume resumes, else the
        agent that last ran the session in this process. A task whose approvers are such a
        policy is refused (ReviewerNotAllowedError) when none of them is at hand.

        Example:
            ```python
            from intermission import HITL, HITLDecision, InMemoryAgentSession
            from intermission.examples import build_ops_agent

            agent, session = build_ops_agent(), InMemoryAgentSession.of("s-1")
            agent.prompt("Please delete user 1001").session(session).call()  # pauses
            (task,) = HITL.pending_tasks(session)
            record = HITL.submit(session, task, HITLDecision.approve().comment("confirmed"))
            print(record.tool_name, record.verdict, record.comment)
            #> delete_user approve confirmed
            print(agent.prompt().session(session).call().content)  # an empty prompt resumes
            #> Done: user 1001 deleted (Note: confirmed).
            ```
        """
        if not isinstance(task, (str, HITLTask)):
            raise InvalidDecisionError(
                f"a task is an HITLTask or its call UUID, not {type(task).__name__}"
            )
        return HITL.submit_all(session, {_uuid_of(task): decision}, agent=agent,
                               principal=principal, _task=task)[0]  # fmt: skip

    @staticmethod
    def submit_all(
        session: AgentSession,
        decisions: Mapping[str, HITLDecision],
        *,
        agent: Any = None,
        principal: Principal | Actor | None = None,
        _task: HITLTask | str | None = None,
    ) -> list[DecisionRecord | Vote]:
        """Record several decisions by call UUID; all are checked before any is stored
        (``agent`` and ``principal``: as for :meth:`submit`)."""
        if not isinstance(decisions, Mapping):
            raise InvalidDecisionError(
                f"submit_all takes a mapping of call UUIDs to decisions, not "
                f"{type(decisions).__name__}"
            )
        judged = []
        for uuid, d in decisions.items():
            actor = _actor(d, principal) if isinstance(d, HITLDecision) else None
            try:  # (each judged at the session's time when it is judged, as ever)
                target = _task if _task is not None else uuid
                j = HITL._judge(session, target, d, agent, actor, None)
            except InvalidDecisionError as exc:
                verdict = d.verdict if isinstance(d, HITLDecision) else "?"
                refusal(session, exc, actor, uuid if isinstance(uuid, str) else None, verdict)
                raise
            judged.append(j)
        if judged:
            HITL._record(session, judged, max(j.now for j in judged))
        return [(j.record or j.vote).model_copy(deep=True) for j in judged]  # type: ignore[union-attr]

    @staticmethod
    def approve_all(
        session: AgentSession,
        reviewer: str | None = None,
        *,
        agent: Any = None,
        principal: Principal | Actor | None = None,
    ) -> list[DecisionRecord | Vote]:
        """Approve every task of the suspended batch (a task already rejected or skipped
        raises DecisionConflictError and nothing is recorded; ``agent`` and ``principal``:
        as for :meth:`submit`)."""
        _check.text("reviewer", reviewer, optional=True)
        decision = HITLDecision.approve()
        if reviewer:
            decision = decision.reviewer(reviewer)
        return HITL.submit_all(
            session, {t.call_uuid: decision for t in session.hitl.tasks}, agent=agent,
            principal=principal,
        )  # fmt: skip

    @staticmethod
    def reject_all(
        session: AgentSession,
        reason: str | None = None,
        reviewer: str | None = None,
        *,
        agent: Any = None,
        principal: Principal | Actor | None = None,
    ) -> list[DecisionRecord | Vote]:
        """Reject every task of the suspended batch, saying why (a rejection without a
        reason is refused, DecisionRefusedError, unless the task's policy allows it; a
        task already approved raises DecisionConflictError and nothing is recorded;
        ``agent`` and ``principal``: as for :meth:`submit`)."""
        _check.text("reason", reason, optional=True)
        _check.text("reviewer", reviewer, optional=True)
        decision = HITLDecision.reject(reason)
        if reviewer:
            decision = decision.reviewer(reviewer)
        return HITL.submit_all(
            session, {t.call_uuid: decision for t in session.hitl.tasks}, agent=agent,
            principal=principal,
        )  # fmt: skip

    @staticmethod
    def rewrite_args(
        session: AgentSession, task: HITLTask | str, args: dict[str, Any], *, agent: Any = None
    ) -> HITLTask:
        """Rewrite a pending call's arguments (in a migration, R62): its votes and
        decision are void, so the resume pauses again for a new approval. See
        :func:`intermission.hitl.rewrite.rewrite_args`."""
        from .rewrite import rewrite_args

        return rewrite_args(session, task, args, agent=agent)

    @staticmethod
    def clear(session: AgentSession) -> None:
        """Forget the suspended batch and its decisions."""
        _state(session)
        session.hitl.tasks.clear()
        session.hitl.decisions.clear()
        session.hitl.expired.clear()
        session.hitl.agent = None
