"""Who may say what became of an approved effect of unknown outcome, and what forgetting
it does to its approval (R60).

An approved tool call records, with its effect's start in the ledger, the approval that
authorised it (:class:`~intermission.decisions.EffectApproval`: the task's call UUID and
its rules as they stood). When the process dies inside the effect, a person checks the
external system and records what happened; that person is judged by the same rules:

- ``resolve`` (it happened, with this result): one principal who could have approved the
  call (its roles, named approvers, not the requester). One suffices even under a quorum:
  the quorum guarded the decision to act, which was taken; what the act did is a fact one
  accountable person checks, and the record names who said it.
- ``forget`` (it did not happen): the same principal, and the approval is reopened: its
  votes and decision on that call are voided (kept on the audit trail as voided), so the
  effect runs again only after a fresh decision under its policy, quorum included.

A graph approval authorises the effects of the nodes after it in the same way: when an
effect starts while a flow graph runs, its entry records :func:`graph_link` — the
session's graph approval (the keys ``open_approval`` recorded, else the defaults) when it
holds ``APPROVE`` for the request under way, with its policy, requester, who approved and
the node that asked. Forgetting such an effect voids that decision (and its votes) while
the stored run still stands on that node, so the node asks again and the effect reruns
only after a fresh decision under the same policy.

An effect nobody had to approve (a plain ``session.once`` outside a graph, or before any
approval) is resolved by whoever the surface admits (the caller in Python, the OS user on
the CLI, a signed-in principal on the console), and recorded.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from ..audit import AuditEntry, note
from ..core.context import GRAPH_RUNNING
from ..decisions import EffectApproval
from ..errors import (
    DecisionRefusedError,
    EffectNotReopenableError,
    ReviewerNotAllowedError,
    UsageError,
)
from ..principals import Actor, actor_of
from .graph import APPROVAL_NODES, ApprovalKeys, checked_keys, graph_ask, keys_of
from .policy import Ask, judge
from .refusals import refusal_entry

__all__ = ["by_hand_under_approval", "graph_link", "judge_resolution", "reopen_approval"]

Action = Literal["resolve", "forget"]


def by_hand_under_approval(
    session: Any, key: str, principal: Any, via: Any, action: Action
) -> None:
    """What ``session.resolve_effect`` / ``forget_effect`` check first: when effect ``key``
    was authorised by an approval, ``principal`` (an Actor, a Principal the caller vouches
    for, or a name as asserted) must be one that approval's policy allows; forgetting it
    reopens the approval, which only a claimed session (or one with no store) can keep —
    a loaded copy would write the ledger at once and leave the decision armed."""
    entry = session.ledger.get(key)
    approval = getattr(entry, "approval", None)
    if approval is None:
        return  # nobody had to approve it: whoever the surface admits, recorded
    actor = _as_actor(principal, via)
    judge_resolution(session, key, approval, actor, action)
    if action == "forget":
        if session.ledger_hook is not None and session.claim_token is None:
            raise UsageError(
                f"effect {key!r} was approved: forgetting it reopens its approval, which is "
                "saved with the session: forget it under the claim (with store.claim(id) as "
                "s: ..., or resolve_unknown_effect(store, id, key, forget=True, principal=...))"
            )
        reopen_approval(session, key, approval, actor)


def _as_actor(principal: Any, via: Any) -> Actor | None:
    """Who acts by hand: an Actor as it is, a Principal as vouched for by the caller, a
    name as asserted."""
    if principal is None or isinstance(principal, Actor):
        return principal
    if isinstance(principal, str):
        return Actor(name=principal, via=via or "api")
    return actor_of(principal, via=via or "api")


def judge_resolution(
    session: Any, key: str, approval: EffectApproval, actor: Actor | None, action: Action
) -> None:
    """Refuse (ReviewerNotAllowedError, nothing changed; its audit entry on ``error.audit``)
    ``actor``'s ``action`` on effect ``key`` unless the approval that authorised it
    allows ``actor`` to decide."""
    try:
        _judge(session, approval, actor)
    except DecisionRefusedError as exc:
        exc.verdict = action
        entry = refusal_entry(exc, actor, key, action)
        exc.audit = entry.model_copy(  # type: ignore[attr-defined]
            update={"detail": {**entry.detail, **_facts(approval)}}
        )
        raise


def graph_link(session: Any, keys: ApprovalKeys | None = None) -> EffectApproval | None:
    """The graph approval that authorises an effect starting now (R60), minted from what
    the session holds, or None: ``keys`` (default: the keys the session's approval node
    recorded, else :class:`ApprovalKeys`'s) must hold ``APPROVE`` decided for the request
    under way (``asked_in``, when recorded, is this request's run). Without ``keys``, only
    while a flow graph runs on the session's context."""
    ctx = getattr(session, "context", None)
    attrs = getattr(ctx, "attrs", None)
    if ctx is None or attrs is None or (keys is None and not attrs.get(GRAPH_RUNNING)):
        return None
    keys = checked_keys(keys) if keys is not None else keys_of(session.hitl.approval_keys)
    keys = keys or ApprovalKeys()
    if ctx.get(keys.decision) != "APPROVE":
        return None
    trace = attrs.get("team_trace")
    run_id = getattr(trace, "run_id", None)
    asked = ctx.get(keys.asked_in)
    if run_id and asked is not None and asked != run_id:
        return None  # an earlier request's decision: not what let this one go on
    ask = graph_ask(session, keys)
    names = [v.name for v in ask.votes if v.verdict == "approve"] if ask is not None else []
    operator = ctx.get(keys.operator)
    if not names and isinstance(operator, str):
        names = [operator]
    time = ctx.get(keys.time)
    decided = float(time) if isinstance(time, (int, float)) and not isinstance(time, bool) else None
    return EffectApproval(
        call_uuid=keys.decision, graph_keys=asdict(keys), agent=session.agent,
        policy=ask.policy if ask is not None else None,
        requester=ask.requester if ask is not None else None,
        escalated=ask is not None and ask.escalated_ms is not None,
        approved_by=names, decided_ms=decided,
        node=(attrs.get(APPROVAL_NODES) or {}).get(keys.decision),
    )  # fmt: skip


def _what(approval: EffectApproval) -> str:
    if approval.graph_keys is not None:
        return f"the outcome of the effect approved at {approval.call_uuid}"
    return f"the outcome of tool call {approval.tool_name} ({approval.call_uuid})"


def _judge(session: Any, approval: EffectApproval, actor: Actor | None) -> None:
    sid = session.session_id
    what = _what(approval)
    name = actor.name if actor is not None else None

    def refused(message: str) -> None:
        raise ReviewerNotAllowedError(
            f"{message}; nothing was changed", rule="approvers", reviewer=name,
            session_id=sid, call_uuid=approval.call_uuid,
        )  # fmt: skip

    if approval.approvers is not None and name not in approval.approvers:
        refused(f"{name!r} may not decide {what} of session {sid!r}: its approvers are "
                + ", ".join(approval.approvers))  # fmt: skip
    if approval.approver_policy:
        allowed = _approver_policy(session, approval)
        if allowed is None:  # fail closed: who may decide is code of the agent, not here
            refused(f"who may decide {what} of session {sid!r} is a policy of agent "
                    f"{approval.agent!r}, which is not at hand: decide in Python with the "
                    "agent (hitl.deciding_for(agent))")  # fmt: skip
        else:
            task = _task(session, approval)
            if task is None or not allowed(name, task):
                refused(f"{name!r} may not decide {what} of session {sid!r}")
    if approval.policy is not None:
        # the approval's rules as they stood: its deadline is over (the call was approved),
        # not its roles; escalated, its escalation's roles may decide too
        ask = Ask(
            policy=approval.policy, requester=approval.requester,
            escalated_ms=0.0 if approval.escalated else None, what=what,
        )  # fmt: skip
        judge(ask, actor, "approve", reason=None, now_ms=session.clock.now_ms(),
              session_id=sid, call_uuid=approval.call_uuid)  # fmt: skip


def _task(session: Any, approval: EffectApproval) -> Any:
    return next((t for t in session.hitl.tasks if t.call_uuid == approval.call_uuid), None)


def _approver_policy(session: Any, approval: EffectApproval) -> Any:
    """The agent's callable approver policy for the approved call, when that agent is at
    hand in this process (never a table of names, R49)."""
    from .api import _approver_policy as policy_of
    from .api import _holder

    task = _task(session, approval)
    if task is None:
        return None
    return policy_of(_holder(session, task, None), task)


def reopen_approval(session: Any, key: str, approval: EffectApproval, actor: Actor | None) -> None:
    """Reopen the approval that authorised effect ``key`` (being forgotten): its votes
    and decision on that call are voided, so the session waits on it again (the voided
    ones stay on the audit trail). EffectNotReopenableError (nothing changed) when the
    session no longer holds that approval open."""
    state = session.hitl
    ran_by = getattr(session.ledger.get(key), "by", None)
    ran_by = ran_by if ran_by not in (None, session.session_id) else None
    if approval.graph_keys is not None:
        _reopen_graph(session, key, approval, actor, ran_by)
        return
    index = next((i for i, t in enumerate(state.tasks) if t.call_uuid == approval.call_uuid), None)
    if index is None or not session.is_pending or ran_by is not None:
        # (a fork that ran it holds its own decision: reopening here would leave it armed)
        _not_reopenable(session, key, approval, actor, ran_by)
    task = state.tasks[index]
    decision = state.decisions.pop(approval.call_uuid, None)
    state.tasks[index] = task.model_copy(update={"votes": [], **_fresh_deadline(session, task)})
    detail: dict[str, Any] = {"effect": key, **_facts(approval)}
    if task.votes:
        detail["voided_votes"] = [v.model_dump(mode="json") for v in task.votes]
    if decision is not None:
        detail["voided_decision"] = decision.model_dump(mode="json")
    note(session, AuditEntry(
        action="approval.reopened", actor=actor.name if actor is not None else None,
        roles=list(actor.roles) if actor is not None else [],
        via=actor.via if actor is not None else None,
        authenticated=bool(actor is not None and actor.authenticated),
        target=approval.call_uuid,
        reason="its effect was forgotten (outcome unknown, found not done): the call runs "
               "again only after a fresh decision under its policy",
        detail=detail,
    ))  # fmt: skip


def _fresh_deadline(session: Any, task: Any) -> dict[str, Any]:
    """A reopened tool approval's deadline, counted afresh from the reopening by the
    session's (the store's) clock: the old one is usually long past, and its
    ``on_expire="approve"`` would run the effect again at once with nobody deciding."""
    if task.deadline_ms is None:
        return {}
    policy = task.policy
    if policy is not None and policy.expires_after_ms is not None:
        span = float(policy.expires_after_ms)
    elif task.created_ms is not None:
        span = max(float(task.deadline_ms) - float(task.created_ms), 0.0)
    else:
        return {}
    now = float(session.clock.now_ms())
    return {"deadline_ms": now + span, "escalated_ms": None, "warned_ms": None}


def _not_reopenable(
    session: Any, key: str, approval: EffectApproval, actor: Actor | None, ran_by: str | None
) -> None:
    error = EffectNotReopenableError(session.session_id, key, approval.call_uuid,
                                     ran_by=ran_by)  # fmt: skip
    entry = refusal_entry(error, actor, key, "forget")
    error.audit = entry.model_copy(  # type: ignore[attr-defined]
        update={"detail": {**entry.detail, **_facts(approval)}}
    )
    raise error


def _reopen_graph(
    session: Any, key: str, approval: EffectApproval, actor: Actor | None, ran_by: str | None
) -> None:
    """Void the graph approval's decision that authorised effect ``key`` — only while the
    stored run stands on the node that asked for it, that decision still recorded: the
    node then asks again before anything after it (the effect) runs."""
    keys = keys_of(approval.graph_keys) or ApprovalKeys()
    ctx = session.context
    time = ctx.get(keys.time)
    decided = float(time) if isinstance(time, (int, float)) and not isinstance(time, bool) else None
    same = ctx.get(keys.decision) == "APPROVE" and decided == approval.decided_ms
    there = approval.node is not None and approval.node in _positions(ctx.trace.graphs.values())
    if not (session.is_pending and not session.hitl.tasks and same and there) or ran_by:
        _not_reopenable(session, key, approval, actor, ran_by)
    voided: dict[str, Any] = {}
    for name in (keys.decision, keys.operator, keys.time, keys.reason, keys.comment, keys.by,
                 keys.votes, keys.escalated, keys.warned):  # fmt: skip
        value = ctx.remove(name)
        if value is not None:
            voided[name] = value
    ask = graph_ask(session, keys)
    if ask is not None and ask.policy.expires_after_ms is not None:
        # a fresh deadline from the reopening (the store's clock): the old one is past,
        # and its on_expire="approve" would rerun the effect with nobody deciding
        ctx.put(keys.deadline, int(session.clock.now_ms() + ask.policy.expires_after_ms))
    detail: dict[str, Any] = {"effect": key, **_facts(approval), "voided_decision": voided}
    note(session, AuditEntry(
        action="approval.reopened", actor=actor.name if actor is not None else None,
        roles=list(actor.roles) if actor is not None else [],
        via=actor.via if actor is not None else None,
        authenticated=bool(actor is not None and actor.authenticated),
        target=approval.call_uuid,
        reason="its effect was forgotten (outcome unknown, found not done): the approval "
               f"node {approval.node!r} asks again, and the effect runs only after a fresh "
               "decision under its policy",
        detail=detail,
    ))  # fmt: skip


def _positions(runs: Any) -> set[str]:
    """Every node a recorded graph run (its subgraphs too) stands on."""
    found: set[str] = set()
    for run in runs:
        found.update(run.tokens)
        found |= _positions(run.children.values())
    return found


def _facts(approval: EffectApproval) -> dict[str, Any]:
    """What an audit record says about the approval behind an effect."""
    facts: dict[str, Any] = {"approval": approval.call_uuid}
    if approval.tool_name is not None:
        facts["tool"] = approval.tool_name
    if approval.node is not None:
        facts["node"] = approval.node
    if approval.policy is not None:
        facts["policy"] = approval.policy.model_dump(mode="json")
    if approval.approved_by:
        facts["approved_by"] = list(approval.approved_by)
    return facts
