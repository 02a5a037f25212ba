"""Graph approvals: write a human decision into the session context (the seed's
``approval.decision`` keys) with the same checks as tool decisions (R23, R23c, R35)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from ..core.session import AgentSession
from ..errors import InvalidDecisionError, ReviewerNotAllowedError
from .api import HITL

__all__ = ["ApprovalKeys", "decide_graph"]


@dataclass(frozen=True, slots=True)
class ApprovalKeys:
    """Context keys a graph approval writes (names configurable, defaults from the seed)."""

    decision: str = "approval.decision"
    operator: str = "approval.operator"
    time: str = "approval.time"
    reason: str = "approval.reason"
    comment: str = "approval.comment"
    request: str = "approval.request"


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
    waiting, a decision is already there, or ``approvers`` does not allow ``reviewer``."""
    if verdict not in ("APPROVE", "REJECT"):
        raise InvalidDecisionError(f"a graph decision is APPROVE or REJECT, not {verdict!r}")
    ctx = session.context
    if not session.is_pending:
        raise InvalidDecisionError(f"session {session.session_id!r} is not waiting for a decision")
    waiting = HITL.pending_tasks(session)
    if waiting:
        # a decision key would be written and resumed on, while the run still waits for
        # the tool approvals: the click would seem to work and change nothing
        raise InvalidDecisionError(
            f"session {session.session_id!r} waits for {len(waiting)} tool approval(s), not "
            "a graph decision: decide them with HITL.submit or HITLPanel"
        )
    if ctx.get(keys.decision) is not None:
        raise InvalidDecisionError(
            f"session {session.session_id!r} already has a decision "
            f"({ctx.get(keys.decision)!r}); a decision is taken once"
        )
    if approvers is not None:
        allowed = approvers(reviewer) if callable(approvers) else reviewer in set(approvers)
        if not allowed:
            raise ReviewerNotAllowedError(f"reviewer {reviewer!r} may not decide this approval")
    ctx.put(keys.decision, verdict)
    ctx.put(keys.operator, reviewer)
    ctx.put(keys.time, int(session.clock.now_ms()))
    if reason is not None:
        ctx.put(keys.reason, reason)
    if comment:
        ctx.put(keys.comment, comment)
