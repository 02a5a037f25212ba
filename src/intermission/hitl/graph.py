"""Graph approvals: write a human decision into the session context (the seed's
``approval.decision`` keys) with the same checks as tool decisions (R23, R23c, R35).

An approval node may give a policy (``open_approval(ctx, policy=ApprovalPolicy(...))``):
it is recorded in the context (``approval.policy``, with who asked and when), judged by
:mod:`intermission.hitl.policy` for every decision from any surface, and its deadlines are
kept by :mod:`intermission.hitl.timeouts`. Votes of a quorum wait in ``approval.votes``
until the outcome is decided; then ``approval.decision`` is written as for any decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
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
from ..events import ApprovalDecidedEvent, ApprovalVotedEvent
from ..policies import ApprovalPolicy
from ..principals import Actor, Principal, actor_of, label
from ..traces import TeamTrace
from .policy import DEFAULT_POLICY, Ask, allowed_roles, judge, progress_text, tally, vote_of

__all__ = [
    "APPROVAL_NODES",
    "DEADLINE_REVIEWER",
    "ApprovalKeys",
    "approval_deadline",
    "binding_deadline",
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
    by: str = "approval.by"
    """Who decided, as recorded: name, roles, the surface (``via``), whether it was
    authenticated, a display note."""
    policy: str = "approval.policy"
    """The approval's policy (written by :func:`open_approval` when it is given one)."""
    requester: str = "approval.requester"
    """Who sent the request that asked for the approval (when the request named one)."""
    votes: str = "approval.votes"
    """The votes so far, while the policy needs more than one decision."""
    asked_at: str = "approval.asked_at"
    """When the approval was first asked for (epoch ms; with a policy)."""
    escalated: str = "approval.escalated"
    """When the policy's escalation happened (epoch ms)."""
    warned: str = "approval.warned"
    """The deadline a warning was emitted for."""

    def cleared(self) -> tuple[str, ...]:
        """The keys a new request's approval starts without."""
        return (self.decision, self.operator, self.time, self.reason, self.comment,
                self.request, self.deadline, self.by, self.policy, self.requester,
                self.votes, self.asked_at, self.escalated, self.warned)  # fmt: skip


def checked_keys(keys: ApprovalKeys | None) -> ApprovalKeys:
    """``keys`` (None: the defaults), or UsageError for anything else."""
    if keys is None:
        return ApprovalKeys()
    if not isinstance(keys, ApprovalKeys):
        raise UsageError(f"keys is an ApprovalKeys, not {type(keys).__name__}")
    return keys


def keys_of(data: Any) -> ApprovalKeys | None:
    """The ApprovalKeys a session recorded (``hitl.approval_keys``), or None."""
    if not isinstance(data, dict):
        return None
    known = {f.name for f in fields(ApprovalKeys)}
    return ApprovalKeys(**{k: v for k, v in data.items() if k in known and isinstance(v, str)})


def _session_of(value: Any) -> AgentSession:
    """A session, or the session of a flow context (``open_approval(ctx, ...)``)."""
    inner = getattr(value, "session", None)
    if inner is not None and getattr(value, "hitl", None) is None:
        return inner  # type: ignore[no-any-return]
    return value  # type: ignore[no-any-return]


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


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def graph_ask(session: AgentSession, keys: ApprovalKeys = ApprovalKeys()) -> Ask | None:
    """The graph approval's policy state (from its context keys), or None when its node
    gave no policy. A stored value that is not what :func:`open_approval` writes is
    refused as the approval would be judged by it (UsageError)."""
    ctx = _context_of(session)
    raw = ctx.get(keys.policy)
    if raw is None:
        return None
    try:
        policy = ApprovalPolicy.model_validate(raw)
        requester = ctx.get(keys.requester)
        who = Actor.model_validate(requester) if requester is not None else None
        votes = [Vote.model_validate(v) for v in ctx.get(keys.votes) or []]
    except Exception as exc:  # (a hand-edited context): nobody can be judged allowed
        raise UsageError(f"the approval's policy keys are not readable: {exc}") from None
    return Ask(
        policy=policy, requester=who, votes=votes, deadline_ms=_number(ctx.get(keys.deadline)),
        escalated_ms=_number(ctx.get(keys.escalated)), warned_ms=_number(ctx.get(keys.warned)),
    )  # fmt: skip


def binding_deadline(session: AgentSession, keys: ApprovalKeys = ApprovalKeys()) -> float | None:
    """When a decision on the graph approval comes too late: its policy's last deadline
    (an escalation's, when it escalates), else ``keys.deadline``."""
    ask = graph_ask(session, keys)
    if ask is not None and ask.policy.expires_after_ms is not None:
        return ask.last_deadline()
    return approval_deadline(session, keys)


def open_approval(
    session: Any,
    keys: ApprovalKeys = ApprovalKeys(),
    *,
    policy: ApprovalPolicy | None = None,
) -> bool:
    """For an approval node, before it reads the decision (``session``: the session or the
    node's flow context): a decision belongs to the request that asked for it. When the
    keys hold one from an earlier request of the session (a new prompt since), they are
    cleared so this request asks again; returns True then. The context's
    ``keys.asked_in`` records the request.

    ``policy``: who may decide, how many, and what its deadline does (see
    :class:`~intermission.ApprovalPolicy`). The first time the approval is asked for, it
    is recorded with who sent the request and when (``keys.policy``, ``keys.requester``,
    ``keys.asked_at``; ``keys.deadline`` from ``expires_after_ms``); every surface then
    judges decisions by it. On a resume, a recorded decision the policy does not allow
    (a hand-edited context) is void: the approval asks again."""
    session = _session_of(session)
    ctx = _context_of(session)
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
    from .policy import satisfied

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
        from .timeouts import apply_graph_deadlines

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
    _write(session, keys, "REJECT", Actor(name=DEADLINE_REVIEWER, via="system"), reason,
           None, now)  # fmt: skip
    return True


def _write(
    session: AgentSession,
    keys: ApprovalKeys,
    verdict: Literal["APPROVE", "REJECT"],
    actor: Actor | None,
    reason: str | None,
    comment: str | None,
    now: float,
    *,
    votes: Sequence[Vote] = (),
    timed_out: bool = False,
) -> None:
    ctx = session.context
    reviewer = None if timed_out or actor is None else actor.name
    ctx.put(keys.decision, verdict)
    ctx.put(keys.operator, reviewer)
    ctx.put(keys.time, int(now))
    if reason is not None:
        ctx.put(keys.reason, reason)
    if comment:
        ctx.put(keys.comment, comment)
    if timed_out:
        ctx.put(keys.by, {"timed_out": True})
    elif actor is not None and actor.via is not None and actor.via != "system":
        ctx.put(keys.by, actor.model_dump(mode="json"))
    if votes:
        ctx.put(keys.votes, [v.model_dump(mode="json") for v in votes])
    # the timeline shows who decided, and why, next to the run it resumes (R47)
    scope = RunScope(f"decision-{session.events.next_seq}", session.agent or "", session)
    fields: dict[str, Any] = {"verdict": verdict, "reviewer": reviewer, "reason": reason,
                              "comment": comment}  # fmt: skip
    if actor is not None and not timed_out:
        fields.update(roles=list(actor.roles), via=actor.via, authenticated=actor.authenticated,
                      display=actor.display)  # fmt: skip
    if timed_out:
        fields["timed_out"] = True
    if votes:
        fields["votes"] = list(votes)
    scope.emit(ApprovalDecidedEvent, **fields)
    note(session, AuditEntry(
        action="task.expired" if timed_out else "approval.recorded",
        actor=reviewer, roles=list(actor.roles) if actor and not timed_out else [],
        via="system" if timed_out or actor is None else actor.via,
        authenticated=bool(actor and actor.authenticated and not timed_out),
        target=keys.decision, reason=reason,
        detail={"verdict": verdict, **({"comment": comment} if comment else {}),
                **({"votes": [v.name for v in votes]} if votes else {})},
    ))  # fmt: skip


def _asserted(reviewer: str | None, principal: Principal | Actor | None) -> Actor | None:
    """Who decides: ``principal`` (vouched for by the caller), else the ``reviewer`` name
    as asserted (not authenticated)."""
    from .api import default_principal

    principal = default_principal(principal)
    if principal is not None:
        return actor_of(principal, display=reviewer)
    return Actor(name=reviewer, via="api") if reviewer else None


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
    """Record a graph approval: ``APPROVE`` or ``REJECT``, who and when. Resume afterwards
    with an empty prompt. Refused (typed error, nothing written) when the session is not
    waiting, waits for tool approvals instead, or ``approvers`` does not allow
    ``reviewer``. The first decision wins (R39): the same verdict again changes nothing;
    the other one raises DecisionConflictError naming who decided and when. After the
    approval's deadline (``keys.deadline``, judged by the session's clock) a decision
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
        from .refusals import refusal

        refusal(session, exc, actor, keys.decision, verdict.lower())
        raise


def _decide(
    session: AgentSession,
    verdict: Literal["APPROVE", "REJECT"],
    actor: Actor | None,
    reason: str | None,
    comment: str | None,
    keys: ApprovalKeys,
    approvers: Iterable[str] | Callable[[str | None], bool] | None,
) -> None:
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
    now = float(session.clock.now_ms())
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
            return
        shown = by.get("display") if isinstance(by, dict) else None
        raise DecisionConflictError(
            session.session_id, "the approval", str(existing),
            "the deadline" if timed_out else label(ctx.get(keys.operator), shown),
            float(time) if isinstance(time, (int, float)) else None,
        )  # fmt: skip
    ours: Verdict = "approve" if verdict == "APPROVE" else "reject"
    judged = ask or Ask(DEFAULT_POLICY)
    judge(judged, actor, ours, reason=reason, now_ms=now, session_id=session.session_id)
    if timed:
        from .timeouts import apply_graph_deadlines

        apply_graph_deadlines(session, keys, now)  # a warning or escalation due by now
    if ask is None or (ask.policy.approvals == 1 and ask.policy.rejections == 1):
        _write(session, keys, verdict, actor, reason, comment, now)
        return
    vote = vote_of(actor, ours, now, reason if ours == "reject" else comment)
    votes = [*ask.votes, vote]
    outcome = tally(ask.policy, votes)
    if outcome is not None:
        _write(session, keys, verdict, actor, reason, comment, now, votes=votes)
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
