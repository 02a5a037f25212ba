"""Graph approvals: write a human decision into the session context (the seed's
``approval.decision`` keys) with the same checks as tool decisions (R23, R23c, R35).

An approval node may give a policy (``open_approval(ctx, policy=ApprovalPolicy(...))``):
it is recorded in the context (``approval.policy``, with who asked and when), judged by
:mod:`intermission.hitl.policy` for every decision from any surface, and its deadlines are
kept by :mod:`intermission.hitl.timeouts`. Votes of a quorum wait in ``approval.votes``
until the outcome is decided; then ``approval.decision`` is written as for any decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any, Literal

from .. import _check
from .._check import shown
from ..audit import AuditEntry, note
from ..core.context import CURRENT_NODE, GRAPH_RUNNING
from ..core.events_log import RunScope
from ..core.session import AgentSession
from ..decisions import Verdict, Vote
from ..errors import (
    DeadlinePassedError,
    DecisionConflictError,
    InvalidDecisionError,
    ReviewerNotAllowedError,
    UsageError,
)
from ..events import ApprovalVotedEvent
from ..policies import ApprovalPolicy
from ..principals import Actor, Principal, actor_of, label, principal_name
from ..traces import TeamTrace
from .approval_keys import (
    DEADLINE_REVIEWER,
    ApprovalKeys,
    approval_deadline,
    binding_deadline,
    checked_keys,
    context_of,
    decided_in_time,
    graph_ask,
    keys_of,
    session_of,
    write_decision,
)
from .deciding import default_principal
from .policy import (
    DEFAULT_POLICY,
    Ask,
    allowed_roles,
    judge,
    progress_text,
    satisfied,
    tally,
    vote_of,
)
from .refusals import refusal
from .timeouts import apply_graph_deadlines

__all__ = [
    "APPROVAL_NODES",
    "DEADLINE_REVIEWER",
    "ApprovalKeys",
    "approval_deadline",
    "binding_deadline",
    "check_graph",
    "checked_keys",
    "decide_graph",
    "decided_in_time",
    "expire_approval",
    "graph_ask",
    "keys_of",
    "open_approval",
]

APPROVAL_NODES = "approval_nodes"
"""``ctx.attrs`` key: the node that opened each graph approval in this run, by decision key
(transient: see :func:`intermission.hitl.unknown_outcome.graph_link`)."""


def open_approval(
    session: Any,
    keys: ApprovalKeys = ApprovalKeys(),
    *,
    policy: ApprovalPolicy | None = None,
) -> bool:
    """Open an approval node's approval for this request, clearing an earlier one's decision.

    Call it for an approval node, before it reads the decision (``session``: the session or
    the node's flow context): a decision belongs to the request that asked for it. When the
    keys hold one from an earlier request of the session (a new prompt since), they are
    cleared so this request asks again; returns True then. The context's ``keys.asked_in``
    records the request.

    ``policy``: who may decide, how many, and what its deadline does (see
    :class:`~intermission.ApprovalPolicy`). The first time the approval is asked for, it
    is recorded with who sent the request and when (``keys.policy``, ``keys.requester``,
    ``keys.asked_at``; ``keys.deadline`` from ``expires_after_ms``); every surface then
    judges decisions by it. On a resume, a recorded decision the policy does not allow
    (a hand-edited context) is void: the approval asks again."""
    session = session_of(session)
    ctx = context_of(session)
    keys = checked_keys(keys)
    if policy is not None and not isinstance(policy, ApprovalPolicy):
        raise UsageError(f"policy is an ApprovalPolicy, not {shown(policy)}")
    node = ctx.attrs.get(CURRENT_NODE) if ctx.attrs.get(GRAPH_RUNNING) else None
    if node is not None:  # where it was asked: an effect it authorises links here (R60)
        ctx.attrs.setdefault(APPROVAL_NODES, {})[keys.decision] = node
    trace = TeamTrace.current(ctx)
    stale = False
    if trace is not None and trace.run_id:
        asked = ctx.get(keys.asked_in)
        stale = asked is not None and asked != trace.run_id
        if stale:
            for key in keys.cleared():
                ctx.remove(key)
        ctx.put(keys.asked_in, trace.run_id)
    if policy is not None:
        _record_policy(session, keys, policy)
    return stale


def _record_policy(session: AgentSession, keys: ApprovalKeys, policy: ApprovalPolicy) -> None:
    ctx = session.context
    recorded = ctx.get(keys.policy)
    if recorded is None and ctx.get(keys.decision) is None:  # asked for the first time
        now = float(session.clock.now_ms())
        ctx.put(keys.policy, policy.model_dump(mode="json"))
        requester = getattr(session, "requester", None)
        if isinstance(requester, Actor):
            ctx.put(keys.requester, requester.model_dump(mode="json"))
        ctx.put(keys.asked_at, int(now))
        if policy.expires_after_ms is not None and ctx.get(keys.deadline) is None:
            ctx.put(keys.deadline, int(now + policy.expires_after_ms))
        session.hitl.approval_keys = asdict(keys)
        who = requester if isinstance(requester, Actor) else None
        note(session, AuditEntry(
            action="approval.opened", actor=who.name if who else None,
            roles=list(who.roles) if who else [], via=who.via if who else None,
            authenticated=bool(who and who.authenticated), target=keys.decision,
            reason=session.pending_reason, detail={"policy": policy.model_dump(mode="json")},
        ))  # fmt: skip
        return
    if recorded is not None and recorded != policy.model_dump(mode="json"):
        # the graph's own policy is the authority: a decision it does not allow is void
        ctx.put(keys.policy, policy.model_dump(mode="json"))
        session.hitl.approval_keys = asdict(keys)
        if ctx.get(keys.decision) is not None and not _decision_allowed(session, keys, policy):
            for key in (keys.decision, keys.operator, keys.time, keys.reason, keys.comment,
                        keys.by, keys.votes):  # fmt: skip
                ctx.remove(key)


def _decision_allowed(session: AgentSession, keys: ApprovalKeys, policy: ApprovalPolicy) -> bool:
    """True when the recorded decision satisfies ``policy`` (see ``policy.satisfied``)."""
    ctx = session.context
    by = ctx.get(keys.by)
    if isinstance(by, dict) and by.get("timed_out"):
        return True
    votes = [Vote.model_validate(v) for v in ctx.get(keys.votes) or []]
    if not votes and isinstance(by, dict) and by.get("name"):
        verdict: Verdict = "approve" if ctx.get(keys.decision) == "APPROVE" else "reject"
        votes = [vote_of(Actor.model_validate(by), verdict, 0.0)]
    requester = ctx.get(keys.requester)
    who = Actor.model_validate(requester) if requester is not None else None
    return satisfied(policy, votes, who)


def expire_approval(
    session: AgentSession, keys: ApprovalKeys = ApprovalKeys(), now_ms: float | None = None
) -> bool:
    """For an approval node on resume: when the deadline passed and no decision was
    recorded before it (``keys.time`` below the deadline — a decision key written late or
    with no time does not count), record ``REJECT`` by ``system:deadline`` (with an
    ApprovalDecidedEvent, replacing any late decision) and return True; the node then
    routes as for any rejection. Time: ``now_ms``, else the session's clock.

    An approval opened with a policy follows its policy instead: warnings and an
    escalation are recorded as they fall due, and at the last deadline the policy's
    ``on_expire`` (reject, or approve) is recorded as timed out; True once it expired."""
    keys = checked_keys(keys)
    _check.number("now_ms", now_ms, 0, 1e15, optional=True)
    ask = graph_ask(session, keys)
    if ask is not None and ask.policy.expires_after_ms is not None:
        now = float(session.clock.now_ms()) if now_ms is None else float(now_ms)
        apply_graph_deadlines(session, keys, now)
        by = session.context.get(keys.by)
        return isinstance(by, dict) and bool(by.get("timed_out"))
    deadline = approval_deadline(session, keys)
    if deadline is None or decided_in_time(session, deadline, keys):
        return False
    now = float(session.clock.now_ms()) if now_ms is None else float(now_ms)
    if now < deadline:
        return False
    reason = "Rejected: the approval deadline passed."
    session.context.remove(keys.comment)  # a late writer's comment is not the verdict's
    write_decision(session, keys, "REJECT", Actor(name=DEADLINE_REVIEWER, via="system"), reason,
           None, now)  # fmt: skip
    return True


def _asserted(reviewer: str | None, principal: Principal | Actor | None) -> Actor | None:
    """Who decides: ``principal`` (vouched for by the caller), else the ``reviewer`` name
    as asserted (not authenticated)."""
    principal = default_principal(principal)
    if principal is not None:
        return actor_of(principal, display=reviewer)
    return Actor(name=principal_name(reviewer), via="api") if reviewer else None


def decide_graph(
    session: AgentSession,
    verdict: Literal["APPROVE", "REJECT"],
    *,
    reviewer: str | None = None,
    reason: str | None = None,
    comment: str | None = None,
    keys: ApprovalKeys = ApprovalKeys(),
    approvers: Iterable[str] | Callable[[str | None], bool] | None = None,
    principal: Principal | Actor | None = None,
) -> None:
    """Record a graph approval: ``APPROVE`` or ``REJECT``, who and when.

    Resume afterwards with an empty prompt. Refused (typed error, nothing written) when the
    session is not waiting, waits for tool approvals instead, or ``approvers`` does not
    allow ``reviewer``. The first decision wins (R39): the same verdict again changes
    nothing; the other one raises DecisionConflictError naming who decided and when. After
    the approval's deadline (``keys.deadline``, judged by the session's clock) a decision
    raises DeadlinePassedError (see :mod:`intermission.hitl.deadlines`).

    Who decides: ``principal`` (a :class:`~intermission.Principal` the calling code
    vouches for; ``reviewer`` then only a display name), else ``reviewer`` as asserted.
    The approval's policy (``open_approval(..., policy=)``) judges it like every
    decision: its roles, not the requester, a reason to reject (always, without a policy
    too), and a quorum — a vote that does not decide the outcome yet is kept in
    ``keys.votes`` (an ApprovalVotedEvent) and the approval stays open."""
    if not isinstance(verdict, str) or verdict not in ("APPROVE", "REJECT"):
        raise InvalidDecisionError(f"a graph decision is APPROVE or REJECT, not {shown(verdict)}")
    if not isinstance(keys, ApprovalKeys):
        raise UsageError(f"keys is an ApprovalKeys, not {type(keys).__name__}")
    if (
        approvers is not None
        and not callable(approvers)
        and (
            isinstance(approvers, (str, bytes))
            or not isinstance(approvers, Iterable)
            or not all(isinstance(a, str) for a in approvers)
        )
    ):
        raise UsageError(f"approvers are reviewer names or a function, not {shown(approvers)}")
    for name, value in (("reviewer", reviewer), ("reason", reason), ("comment", comment)):
        if value is not None and not isinstance(value, str):
            raise InvalidDecisionError(f"{name} is text, not {type(value).__name__}")
    actor = _asserted(reviewer, principal)
    try:
        _decide(session, verdict, actor, reason, comment, keys, approvers)
    except InvalidDecisionError as exc:
        refusal(session, exc, actor, keys.decision, verdict.lower())
        raise


def check_graph(
    session: AgentSession,
    verdict: Literal["APPROVE", "REJECT"],
    *,
    principal: Actor,
    reason: str | None = None,
    keys: ApprovalKeys = ApprovalKeys(),
    approvers: Iterable[str] | Callable[[str | None], bool] | None = None,
    now_ms: float | None = None,
) -> None:
    """Raise what :func:`decide_graph` would raise for this decision by ``principal``, and
    write nothing (no refusal noted either): how a view tells what its viewer may do now,
    by the very rules that judge the click. The same verdict recorded already passes.
    ``now_ms``: judge deadlines by then (default: the session's clock)."""
    _judged(session, verdict, principal, reason, checked_keys(keys), approvers, now_ms)


def _judged(
    session: AgentSession,
    verdict: Literal["APPROVE", "REJECT"],
    actor: Actor | None,
    reason: str | None,
    keys: ApprovalKeys,
    approvers: Iterable[str] | Callable[[str | None], bool] | None,
    now_ms: float | None = None,
) -> tuple[Ask | None, float, bool]:
    """Judge a graph decision (nothing changes): the approval's Ask, the time it was
    judged at, and True when the same verdict is recorded already (a no-op)."""
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
    name = actor.name if actor is not None else None
    if approvers is not None:
        allowed = approvers(name) if callable(approvers) else name in set(approvers)
        if not allowed:
            raise ReviewerNotAllowedError(
                f"reviewer {name!r} may not decide this approval", rule="approvers",
                reviewer=name, verdict=verdict.lower(), session_id=session.session_id,
            )  # fmt: skip
    now = float(session.clock.now_ms()) if now_ms is None else float(now_ms)
    ask = graph_ask(session, keys)
    timed = ask is not None and ask.policy.expires_after_ms is not None
    deadline = approval_deadline(session, keys)
    late = not timed and deadline is not None and now >= deadline
    existing = ctx.get(keys.decision)
    if late and deadline is not None and not decided_in_time(session, deadline, keys):
        # refused, whatever a late ``context.put`` left in the decision key
        raise DeadlinePassedError(session.session_id, deadline, now, approval=keys.decision)
    if ask is not None:  # who may decide is the policy's: checked before any no-op
        roles = allowed_roles(ask.policy, ask.escalated_at(now))
        if (
            roles is not None
            and existing is not None
            and not (actor is not None and roles & set(actor.roles))
        ):
            existing = None  # (judged below: refused as not allowed)
    if existing is not None:
        time = ctx.get(keys.time)
        by = ctx.get(keys.by)
        timed_out = isinstance(by, dict) and by.get("timed_out")
        if existing == verdict and not timed_out:  # (a timeout's verdict is nobody's)
            return ask, now, True
        shown = by.get("display") if isinstance(by, dict) else None
        raise DecisionConflictError(
            session.session_id, "the approval", str(existing),
            "the deadline" if timed_out else label(ctx.get(keys.operator), shown),
            float(time) if isinstance(time, (int, float)) else None,
        )  # fmt: skip
    ours: Verdict = "approve" if verdict == "APPROVE" else "reject"
    judged = ask or Ask(DEFAULT_POLICY)
    judge(judged, actor, ours, reason=reason, now_ms=now, session_id=session.session_id)
    return ask, now, False


def _decide(
    session: AgentSession,
    verdict: Literal["APPROVE", "REJECT"],
    actor: Actor | None,
    reason: str | None,
    comment: str | None,
    keys: ApprovalKeys,
    approvers: Iterable[str] | Callable[[str | None], bool] | None,
) -> None:
    ask, now, same = _judged(session, verdict, actor, reason, keys, approvers)
    if same:
        return
    ctx = session.context
    ours: Verdict = "approve" if verdict == "APPROVE" else "reject"
    timed = ask is not None and ask.policy.expires_after_ms is not None
    if timed:
        apply_graph_deadlines(session, keys, now)  # a warning or escalation due by now
    if ask is None or (ask.policy.approvals == 1 and ask.policy.rejections == 1):
        write_decision(session, keys, verdict, actor, reason, comment, now)
        return
    vote = vote_of(actor, ours, now, reason if ours == "reject" else comment)
    votes = [*ask.votes, vote]
    outcome = tally(ask.policy, votes)
    if outcome is not None:
        write_decision(session, keys, verdict, actor, reason, comment, now, votes=votes)
        return
    ctx.put(keys.votes, [v.model_dump(mode="json") for v in votes])
    text = progress_text(ask.policy, votes, roles=allowed_roles(ask.policy, ask.escalated_at(now)),
                         requester=ask.requester)  # fmt: skip
    scope = RunScope(f"decision-{session.events.next_seq}", session.agent or "", session)
    scope.emit(ApprovalVotedEvent, target=keys.decision, vote=vote, progress=text)
    note(session, AuditEntry(
        action="approval.recorded", actor=vote.name, roles=list(vote.roles), via=vote.via,
        authenticated=vote.authenticated, target=keys.decision, reason=reason,
        detail={"verdict": verdict, "vote": True, "progress": text},
    ))  # fmt: skip
