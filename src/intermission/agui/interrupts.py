"""The AG-UI interrupt rules, checked against the stored session (never the client).

A session's open interrupts: each undecided tool task (``reason: "tool_call"``, its call
UUID as id and ``toolCallId``), or, for a session paused without tool tasks (a graph
approval node), one ``reason: "confirmation"`` interrupt. :func:`plan` reads a run's
``resume`` against them and says what the server does: run a new prompt, record the
decisions and resume, replay the run that already applied them, or refuse (``Refusal``,
sent as ``RUN_ERROR``) with nothing changed. The server plans on the session it holds the
claim of, so what it plans is what it does.

A new user message is never dropped: on a thread whose interrupts are all settled but not
applied yet (expired, or decided in another client), the resume that applies them runs
first and the message after it, in the same AG-UI run (``Plan.then``).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui import core as ag
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from ..audit import AuditEntry
from ..decisions import HITLDecision
from ..hitl import HITL
from ..hitl.graph import ApprovalKeys, binding_deadline, keys_of
from ..hitl.refusals import refusal_entry
from ..hitl.timeouts import progress_of
from ..principals import Actor, Principal, label

__all__ = [
    "RESPONSE_SCHEMA",
    "Decided",
    "Plan",
    "Refusal",
    "Verdict",
    "actor_of_resume",
    "decided",
    "decision_of",
    "expired_ids",
    "open_interrupts",
    "plan",
]

MAX_REASON = 2000
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object"},
        "reason": {"type": "string", "maxLength": MAX_REASON},
    },
    "required": ["approved"],
    "additionalProperties": False,
    "description": "approve (optionally with edited arguments) or reject with a reason",
}


class Refusal(Exception):
    """A run the rules refuse: sent as ``RUN_ERROR {code, message}``; nothing changed."""

    def __init__(self, code: str, message: str, audit: list[AuditEntry] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.audit = audit or []
        """The refused decisions it stands for, for the audit trail (who tried what)."""


class Payload(BaseModel):
    """A resume payload, as :data:`RESPONSE_SCHEMA` says."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    approved: StrictBool
    edited_args: dict[str, Any] | None = Field(default=None, alias="editedArgs")
    reason: str | None = Field(default=None, max_length=MAX_REASON)


@dataclass(frozen=True)
class Verdict:
    """What one resume entry asks for (normalised)."""

    approve: bool
    edited: dict[str, Any] | None
    reason: str | None
    reviewer: str | None
    via: Literal["agui", "console"] = "agui"


@dataclass(frozen=True)
class Decided:
    """A decision already taken on an interrupt (recorded, or applied by a resume)."""

    approve: bool
    edited: dict[str, Any] | None
    reviewer: str | None
    time_ms: float | None
    applied: bool
    seq: int = 0
    """The log event that recorded or applied it (0: not in the log yet)."""
    timed_out: bool = False
    """Its deadline decided it, nobody did."""
    display: str | None = None
    """A display name the decider typed (not who decided)."""


@dataclass
class Plan:
    """What a run does: ``prompt`` (a new request), ``resume`` (``record`` first, then
    resume; then run ``then``, the run's new user message, if the resume ends the pause),
    or ``replay`` (the run at ``replay_seq`` applied this very resume)."""

    kind: Literal["prompt", "resume", "replay"]
    prompt: str | None = None
    record: dict[str, Verdict] = field(default_factory=dict)
    replay_seq: int = 0
    then: str | None = None


def _iso(ms: float) -> str:
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _keys(session: Any) -> ApprovalKeys:
    """The graph approval's context keys (the defaults unless its node named others)."""
    return keys_of(session.hitl.approval_keys) or ApprovalKeys()


def _pause_ids(session: Any) -> list[tuple[int, str]]:
    """``(event seq, graph approval id)`` of each event that decided or voted on a graph
    approval: its id is ``approval-<seq>`` of the end event that paused for it, and stays
    that id through the pauses its votes cause (a quorum's first approvals)."""
    out: list[tuple[int, str]] = []
    last = 0
    asked: int | None = None
    for event in session.events:
        kind = event.kind
        if kind in ("run_end", "team_end") and event.pending:
            last = event.seq
        elif kind == "approval_voted" and not getattr(event, "tool_name", None):
            asked = last if asked is None else asked
            out.append((event.seq, f"approval-{asked}"))
        elif kind == "approval_decided":
            out.append((event.seq, f"approval-{asked if asked is not None else last}"))
            asked = None
        elif kind in ("run_start", "team_start") and getattr(event, "prompt", None):
            asked = None  # a new request asks anew
    out.append((0, f"approval-{asked if asked is not None else last}"))
    return out


def _graph_id(session: Any) -> str:
    """The id of the open graph approval: ``approval-<seq>`` of the end event that paused
    for it (the first such pause, when votes paused it again)."""
    return _pause_ids(session)[-1][1]


def _graph_deadline(session: Any) -> float | None:
    """A graph approval's binding deadline (``approval.deadline``, or its policy's last
    one), where it has one."""
    return binding_deadline(session, _keys(session))


def _graph_paused(session: Any) -> bool:
    return bool(session.is_pending) and not session.hitl.tasks


def _deadline_of(session: Any, iid: str) -> float | None:
    """The binding deadline of an open interrupt (None: it has none, or it only marks the
    task expired: ``on_expire="wait"``)."""
    for task in session.hitl.tasks:
        if task.call_uuid == iid:
            return task.decide_by_ms  # type: ignore[no-any-return]
    return _graph_deadline(session) if not session.hitl.tasks else None


def expired_ids(session: Any, now_ms: float) -> set[str]:
    """The open interrupts whose binding deadline has passed: nobody can decide them any
    more, and the next resume rejects them (reviewer ``system:deadline``, as the core
    does), so they are not open for the rules nor listed."""
    out: set[str] = set()
    for i in open_interrupts(session):
        deadline = _deadline_of(session, i.id)
        if deadline is not None and now_ms >= deadline:
            out.add(i.id)
    return out


def open_interrupts(session: Any, now_ms: float | None = None) -> list[ag.Interrupt]:
    """The session's undecided interrupts, as AG-UI ``Interrupt`` objects (with ``now_ms``:
    the ones still decidable then, expired ones left out)."""
    if not session.is_pending:
        return []
    if now_ms is not None:
        gone = expired_ids(session, now_ms)
        return [i for i in open_interrupts(session) if i.id not in gone]
    out: list[ag.Interrupt] = []
    if session.hitl.tasks:
        for task in HITL.pending_tasks(session):
            args = json.dumps(task.args, ensure_ascii=False, sort_keys=True)
            meta: dict[str, Any] = {"tool": task.tool_name, "args": task.args}
            if task.agent:
                meta["agent"] = task.agent
            if task.reason:
                meta["reason"] = task.reason
            if task.approvers is not None:
                meta["approvers"] = task.approvers
            progress = progress_of(session, task.call_uuid, now_ms)
            if progress is not None:
                meta.update(progress.metadata())
            out.append(
                ag.Interrupt(
                    id=task.call_uuid,
                    reason="tool_call",
                    tool_call_id=task.call_uuid,
                    message=f"Approve {task.tool_name}({args})?",
                    response_schema=RESPONSE_SCHEMA,
                    expires_at=_iso(task.decide_by_ms) if task.decide_by_ms is not None else None,
                    metadata={"intermission": meta},
                )
            )
        return out
    keys = _keys(session)
    if session.context.get(keys.decision) is not None:
        return []  # decided, not yet resumed
    request = session.context.get(keys.request)
    text = request if isinstance(request, str) else json.dumps(request, ensure_ascii=False)
    deadline = _graph_deadline(session)
    meta = {"request": request, "reason": session.pending_reason}
    progress = progress_of(session, None, now_ms)
    if progress is not None:
        meta.update(progress.metadata())
    out.append(
        ag.Interrupt(
            id=_graph_id(session),
            reason="confirmation",
            expires_at=_iso(deadline) if deadline is not None else None,
            message=(text if request is not None else session.pending_reason or "Approve?"),
            response_schema=RESPONSE_SCHEMA,
            metadata={"intermission": meta},
        )
    )
    return out


def decided(session: Any) -> dict[str, Decided]:
    """Every decision this session's interrupts have had, by interrupt id: applied ones
    (from the event log) and recorded ones not applied yet."""
    out: dict[str, Decided] = {}
    graph_ids = dict(_pause_ids(session))
    for event in session.events:
        kind = event.kind
        if kind == "hitl_decided":
            d = event.decision
            out[event.call_uuid] = Decided(
                d.verdict == "approve",
                d.modified_args,
                d.reviewer,
                d.time_ms,
                True,
                event.seq,
                d.timed_out,
                d.display,
            )
        elif kind == "approval_decided":
            out[graph_ids[event.seq]] = Decided(
                event.verdict == "APPROVE",
                None,
                event.reviewer,
                event.ts,
                True,
                event.seq,
                event.timed_out,
                event.display,
            )
    for uuid, d in session.hitl.decisions.items():
        out[uuid] = Decided(d.verdict == "approve", d.modified_args, d.reviewer, d.time_ms,
                            False, timed_out=d.timed_out, display=d.display)  # fmt: skip
    ctx = session.context
    keys = _keys(session)
    if _graph_paused(session) and ctx.get(keys.decision) is not None:
        key = _graph_id(session)
        old = out.get(key)
        time = ctx.get(keys.time)
        by = ctx.get(keys.by)
        out[key] = Decided(
            ctx.get(keys.decision) == "APPROVE",
            None,
            ctx.get(keys.operator),
            float(time) if isinstance(time, (int, float)) else None,
            False,
            old.seq if old else 0,
            isinstance(by, dict) and bool(by.get("timed_out")),
            by.get("display") if isinstance(by, dict) else None,
        )
    return out


def voted(session: Any, iid: str, name: str) -> tuple[int, bool, Any] | None:
    """``(event seq, approve, edited args)`` of ``name``'s vote on the open interrupt
    ``iid`` (a quorum's approval, recorded), or None."""
    graph = iid == _graph_id(session) and not session.hitl.tasks
    for event in reversed(list(session.events)):
        if event.kind != "approval_voted" or event.vote.name != name:
            continue
        if (graph and not event.tool_name) or event.target == iid:
            vote = event.vote
            return event.seq, vote.verdict == "approve", vote.modified_args
    return None


def actor_of_resume(principal: Principal | None, verdict: Verdict) -> Actor | None:
    """Who decides a resume: the authenticated principal (the client's
    ``metadata.reviewer`` a display note only), or without auth the name the client sent,
    as asserted."""
    if principal is not None:
        shown = verdict.reviewer if verdict.reviewer != principal.name else None
        return Actor(name=principal.name, roles=sorted(principal.roles), via=verdict.via,
                     authenticated=True, display=shown)  # fmt: skip
    if verdict.reviewer:
        return Actor(name=verdict.reviewer, via=verdict.via)
    return None


def _verdict(entry: ag.ResumeEntry) -> Verdict:
    meta = entry.metadata or {}
    reviewer = meta.get("reviewer")
    if reviewer is not None and (not isinstance(reviewer, str) or not 0 < len(reviewer) <= 200):
        raise Refusal("INVALID_PAYLOAD", "metadata.reviewer is a name (1 to 200 characters)")
    if reviewer is not None and any(ord(c) < 32 or ord(c) == 127 for c in reviewer):
        raise Refusal("INVALID_PAYLOAD", "metadata.reviewer holds no control characters")
    via: Literal["agui", "console"] = "console" if meta.get("via") == "console" else "agui"
    if entry.status == "cancelled":
        return Verdict(False, None, "cancelled by the client", reviewer, via)
    try:
        payload = Payload.model_validate(entry.payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "payload"
        raise Refusal(
            "INVALID_PAYLOAD",
            f"resume payload of interrupt {entry.interrupt_id!r} does not match its "
            f"responseSchema ({where}: {first['msg']}); nothing was changed",
        ) from None
    # (a rejection without a reason is the approval's policy to judge, as on every surface)
    if not payload.approved and payload.edited_args is not None:
        raise Refusal("INVALID_PAYLOAD", "only an approval can carry editedArgs")
    return Verdict(payload.approved, payload.edited_args, payload.reason, reviewer, via)


def _audited(
    refused: Refusal, kind: str, iid: str, v: Verdict, principal: Principal | None
) -> Refusal:
    """``refused`` with the audit entry of the decision it refuses (a surface refusing a
    decision before the policy judges it keeps it in the trail as the policy's refusals)."""
    who = actor_of_resume(principal, v)
    verdict = "approve" if v.approve else "reject"
    refused.audit.append(refusal_entry(refused, who, iid, verdict, kind=kind))
    return refused


def _conflict(session_id: str, iid: str, old: Decided) -> Refusal:
    who = "the deadline" if old.timed_out else (
        label(old.reviewer, old.display) or "an unnamed reviewer"
    )  # fmt: skip
    when = f" at {_iso(old.time_ms)}" if old.time_ms is not None else ""
    what = (
        "approved" + (" with edited arguments" if old.edited else "")
        if old.approve
        else ("rejected")
    )
    return Refusal(
        "DECISION_CONFLICT",
        f"interrupt {iid!r} of thread {session_id!r} was already {what} by {who}{when}; "
        "the first decision stands and nothing was changed",
    )


def _canonical(value: Any) -> str:
    """JSON-exact form: ``true`` and ``1``, ``1`` and ``1.0`` differ (Python's ``==`` says
    they are equal, so a different decision would pass for a retry)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _same(v: Verdict, d: Decided) -> bool:
    if v.approve != d.approve:
        return False
    return not v.approve or _canonical(v.edited or None) == _canonical(d.edited or None)


def plan(
    session: Any,
    resume: list[ag.ResumeEntry] | None,
    prompt: str | None,
    now_ms: float,
    principal: Principal | None = None,
    run_id: str | None = None,
) -> Plan:
    """What a run on this stored session does, or :class:`Refusal`. ``principal``: the
    authenticated caller; ``run_id``: the run's id (a retried delivery of a run that
    recorded the caller's vote replays that run; another run of the same vote is refused:
    a principal counts once)."""
    entries = resume or []
    every = {i.id: i for i in open_interrupts(session)}
    late = expired_ids(session, now_ms)
    opened = {k: i for k, i in every.items() if k not in late}
    if not entries:
        return _without_resume(session, opened, prompt)
    ids = [e.interrupt_id for e in entries]
    if len(set(ids)) != len(ids):
        raise Refusal("DUPLICATE_INTERRUPT", "a resume names each interrupt once")
    verdicts = {e.interrupt_id: _verdict(e) for e in entries}
    for iid in ids:
        if iid in late:
            refused = Refusal(
                "INTERRUPT_EXPIRED",
                f"interrupt {iid!r} expired at {every[iid].expires_at}; nothing was changed "
                "(a run without it rejects it as system:deadline)",
            )
            raise _audited(refused, "DeadlinePassedError", iid, verdicts[iid], principal)
    before = decided(session)
    unknown = [i for i in ids if i not in opened and i not in before]
    if unknown:
        refused = Refusal(
            "UNKNOWN_INTERRUPT",
            f"no interrupt {', '.join(map(repr, unknown))} in thread {session.session_id!r}; "
            "nothing was changed",
        )
        for iid in unknown:  # (on the trail as every refused decision: who tried what)
            _audited(refused, "UnknownTaskError", iid, verdicts[iid], principal)
        raise refused
    for iid, v in verdicts.items():
        old = before.get(iid)
        if old is not None and (old.timed_out or not _same(v, old)):  # (a timeout is nobody's)
            refused = _conflict(session.session_id, iid, old)
            raise _audited(refused, "DecisionConflictError", iid, v, principal)
    if not any(i in opened for i in ids) and all(before[i].applied for i in ids):
        if prompt:  # applied already; the message the thread has not seen is a run of its own
            return _without_resume(session, opened, prompt)
        # the very decisions already applied (checked above): a retried delivery gets the
        # run that applied them again, even when that run paused on new interrupts
        return Plan("replay", replay_seq=max(before[i].seq for i in ids))
    if opened:
        missing = sorted(set(opened) - set(ids))
        if missing:
            raise Refusal(
                "PARTIAL_RESUME",
                f"a resume covers every open interrupt; missing {', '.join(missing)}; "
                "nothing was changed",
            )
        again = _votes_again(session, verdicts, principal, run_id)
        if again is not None:  # a retried delivery of this caller's vote: its run again
            return Plan("replay", replay_seq=again)
        record = {i: v for i, v in verdicts.items() if i in opened}
        return Plan("resume", record=record, then=prompt)
    return Plan("resume", then=prompt)  # recorded, not applied yet: resume applies them


def _without_resume(session: Any, opened: dict[str, ag.Interrupt], prompt: str | None) -> Plan:
    """A run that decides nothing: refused while interrupts are open; on a thread paused on
    settled ones (expired, or decided elsewhere) it applies them, then runs its message."""
    if opened:
        raise Refusal(
            "INTERRUPTS_OPEN",
            f"thread {session.session_id!r} has {len(opened)} open interrupt(s) "
            f"({', '.join(sorted(opened))}): a run must carry a resume covering all "
            "of them; nothing was changed",
        )
    if session.is_pending:
        return Plan("resume", then=prompt)
    if not prompt:
        if session.status == "paused":  # a request that did not end (its model failed)
            return Plan("resume")
        raise Refusal("NO_PROMPT", "a new run needs a user message")
    return Plan("prompt", prompt=prompt)


def _votes_again(
    session: Any, verdicts: dict[str, Verdict], principal: Principal | None, run_id: str | None
) -> int | None:
    """The seq of the vote a retried run repeats (the same run id, caller and verdicts, on
    every interrupt it names), or None."""
    from .replay import notes_of, runs_of

    if run_id is None:
        return None
    seqs = []
    for iid, v in verdicts.items():
        who = actor_of_resume(principal, v)
        found = voted(session, iid, who.name) if who is not None else None
        if found is None:
            return None
        seq, approve, edited = found
        if approve != v.approve or (
            approve and _canonical(edited or None) != _canonical(v.edited or None)
        ):
            return None
        seqs.append(seq)
    if not seqs:
        return None
    named = notes_of(session).get("runs") or {}
    after = [events for events in runs_of(session) if events[0].seq > max(seqs)]
    if not after or named.get(after[0][0].run_id) != run_id:
        return None  # not a retry of the run that recorded it: a second vote
    return max(seqs)


def decision_of(v: Verdict) -> HITLDecision:
    """The HITL decision a verdict records."""
    if v.approve:
        d = HITLDecision.approve()
        if v.edited is not None:
            d = d.modified_args(v.edited)
    else:
        d = HITLDecision.reject(v.reason)
    return d
