"""Where a graph approval lives: its keys in the session context (the seed's
``approval.decision`` and the rest), reading them — its deadline, its policy state — and
writing a decision into them.

The leaf under :mod:`intermission.hitl.graph` (which decides) and
:mod:`intermission.hitl.timeouts` (which records what fell due): both read and write the
keys through this module, so neither imports the other to do it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from ..audit import AuditEntry, note
from ..core.events_log import RunScope
from ..core.session import AgentSession
from ..decisions import Vote
from ..errors import UsageError
from ..events import ApprovalDecidedEvent
from ..policies import ApprovalPolicy
from ..principals import Actor, nameless_via
from .policy import Ask

__all__ = [
    "DEADLINE_REVIEWER",
    "ApprovalKeys",
    "approval_deadline",
    "binding_deadline",
    "checked_keys",
    "context_of",
    "decided_in_time",
    "graph_ask",
    "keys_of",
    "session_of",
    "write_decision",
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


def session_of(value: Any) -> AgentSession:
    """A session, or the session of a flow context (``open_approval(ctx, ...)``)."""
    inner = getattr(value, "session", None)
    if inner is not None and getattr(value, "hitl", None) is None:
        return inner  # type: ignore[no-any-return]
    return value  # type: ignore[no-any-return]


def context_of(session: AgentSession) -> Any:
    """The session's flow context, where its graph approval's keys live."""
    ctx = getattr(session, "context", None)
    if ctx is None or not callable(getattr(ctx, "get", None)):
        raise UsageError(f"a graph approval lives in a session, not {type(session).__name__}")
    return ctx


def approval_deadline(session: AgentSession, keys: ApprovalKeys = ApprovalKeys()) -> float | None:
    """The deadline of the session's graph approval (``keys.deadline``, epoch ms), or None
    when its node set none (anything but a finite number counts as none)."""
    value = context_of(session).get(checked_keys(keys).deadline)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def decided_in_time(
    session: AgentSession, deadline: float, keys: ApprovalKeys = ApprovalKeys()
) -> bool:
    """True when the approval holds a decision recorded before ``deadline``: its
    ``keys.time`` (written by decide_graph) is a number below it. A decision key written
    without a time (``context.put``) has no proof it came in time."""
    ctx = context_of(session)
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
    ctx = context_of(session)
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


def write_decision(
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
    """Write the approval's decision into ``keys`` (who, when, why; the votes of a
    quorum), with its ApprovalDecidedEvent and audit entry."""
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
    elif not timed_out and nameless_via() is not None:
        fields.update(via=nameless_via())  # (nobody named: the surface still is)
    if timed_out:
        fields["timed_out"] = True
    if votes:
        fields["votes"] = list(votes)
    scope.emit(ApprovalDecidedEvent, **fields)
    note(session, AuditEntry(
        action="task.expired" if timed_out else "approval.recorded",
        actor=reviewer, roles=list(actor.roles) if actor and not timed_out else [],
        via="system" if timed_out or (actor is None and nameless_via() is None)
        else actor.via if actor is not None else nameless_via(),
        authenticated=bool(actor and actor.authenticated and not timed_out),
        target=keys.decision, reason=reason,
        detail={"verdict": verdict, **({"comment": comment} if comment else {}),
                **({"votes": [v.name for v in votes]} if votes else {})},
    ))  # fmt: skip
