"""How a save's notifications are derived: from what the save adds — the events the core
appended since the session was loaded (or last saved) and the audit entries noted on it —
by the two tables below (a new kind of event or audit action is one line). The core never
knows: it emits events and notes audit entries; the store reads them here, in the save.

What is written is raw (the tasks as the session keeps them, a graph approval's request):
a pause's notification is put together from the pieces the save encoded already, and what
a person is shown (bounded argument summaries, what a policy still needs) is made when the
notification is sent (:mod:`intermission.notify.notification`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import audit
from .._json import canonical_dumps
from .base import StoredRow, row_of
from .outbox import Written, new_key

__all__ = ["AUDIT_RULES", "EVENT_RULES", "REPLIES", "derive"]

log = logging.getLogger("intermission.outbox")

REPLIES = "replies"
"""``session.meta`` key of the reply handles a surface left on the session (see
:func:`_replies`)."""

_REWRITTEN = "task.rewritten"  # (hitl.rewrite.rewrite_args)
_DEADLINE = "system:deadline"  # (hitl.graph.DEADLINE_REVIEWER: a decision the clock took)

EVENT_RULES: dict[str, Callable[[Any], str | None]] = {
    "hitl_pending": lambda e: "pending",
    "run_end": lambda e: "pending" if e.pending else None,
    "team_end": lambda e: "pending" if e.pending else None,
    # (a policy's expiry is told by its ``task.expired`` audit entry, not by its decision)
    "hitl_decided": lambda e: (
        None if e.decision.reviewer == _DEADLINE or e.decision.timed_out else "decided"
    ),
    "approval_decided": lambda e: (
        None if e.timed_out else "expired" if e.reviewer == _DEADLINE else "decided"
    ),
    "hitl_expired": lambda e: "expired",
}
"""Event kind → the notification it causes (None: this one causes none)."""

AUDIT_RULES: dict[str, str] = {
    "task.warned": "warning",
    "task.escalated": "escalated",
    "task.expired": "expired",
    "effect.unknown": "unknown_outcome",
}
"""Audit action noted on a session → the notification its save causes."""


# -- derivation ---------------------------------------------------------------------------
@dataclass
class _Draft:
    kind: str
    tasks: list[dict[str, Any]] = field(default_factory=list)
    """The tool calls concerned, raw (``HITLTask`` as JSON)."""
    items: list[dict[str, Any]] = field(default_factory=list)
    """Interrupts concerned that have no task here (a graph approval, a task gone)."""
    detail: dict[str, Any] = field(default_factory=dict)
    roles: list[str] = field(default_factory=list)
    once: str | None = None
    """Told only once, whatever saves derive it again (see Written.once)."""


def _task(session: Any, call_uuid: Any) -> Any:
    for task in session.hitl.tasks:
        if task.call_uuid == call_uuid:
            return task
    return None


def _given(session: Any) -> dict[str, Any] | None:
    """Approvals recorded so far per task (a quorum policy's votes), by who gave them."""
    found = {
        str(t.call_uuid): sorted({v.name for v in t.votes if v.verdict == "approve"})
        for t in session.hitl.tasks
        if t.votes
    }
    return {k: v for k, v in found.items() if v} or None


def _from_event(session: Any, kind: str, event: Any) -> _Draft:
    if event.kind in ("hitl_decided", "hitl_expired"):
        task = _task(session, event.call_uuid)
        tasks = [task.model_dump(mode="json")] if task is not None else []
        items = [] if tasks else [{"id": event.call_uuid, "type": "tool_call",
                                   "tool": event.tool_name}]  # fmt: skip
        if event.kind == "hitl_decided":
            record = event.decision
            detail = {"verdict": record.verdict, "reviewer": record.reviewer,
                      "comment": record.comment}  # fmt: skip
        else:
            detail = {"resolution": event.resolution}
        return _Draft(kind, tasks, items, detail)
    # a graph approval's decision
    detail = {"verdict": event.verdict.lower(), "reviewer": event.reviewer,
              "reason": event.reason, "comment": event.comment}  # fmt: skip
    item = {"id": _last_pause_id(session, event.seq), "type": "confirmation", "tool": None}
    return _Draft(kind, items=[item], detail=detail)


_ENDS = frozenset({"run_end", "team_end"})


def _last_pause_id(session: Any, before: int) -> str:
    """The console's id of a graph approval: ``approval-<seq>`` of the last end event
    that paused (``approval-0``: none did)."""
    event = session.events.last(_ENDS, before, lambda e: e.pending)
    return f"approval-{event.seq}" if event is not None else "approval-0"


def _from_audit(session: Any, kind: str, entry: Any) -> _Draft:
    target = entry.target
    task = _task(session, target)
    tasks = [task.model_dump(mode="json")] if task is not None else []
    items: list[dict[str, Any]] = []
    if not tasks and target:
        # a graph approval's entry names its decision key; the console names the approval
        # by the end event that paused for it
        keys = session.hitl.approval_keys
        graph = isinstance(keys, dict) and target == keys.get("decision")
        items = [{"id": _last_pause_id(session, session.events.next_seq) if graph else target,
                  "type": "confirmation", "tool": None}]  # fmt: skip
    detail: dict[str, Any] = {"action": entry.action, "reason": entry.reason}
    if entry.actor:
        detail["actor"] = entry.actor
    extra = entry.detail.get("roles") if isinstance(entry.detail, dict) else None
    roles = sorted(map(str, extra)) if isinstance(extra, list) else []  # who is told now
    return _Draft(kind, tasks, items, detail, roles)


def _unknown_outcomes(session: Any) -> list[_Draft]:
    """Effects this session started and never saw end, in a save made while it is not
    running: their outcome is unknown until a person resolves them (told once per attempt
    at the effect, however many saves see it)."""
    if session.status == "running":
        return []
    sid = session.session_id
    gen = session.generation
    return [
        _Draft(
            "unknown_outcome",
            detail={"effect": key, "started_ms": entry.started_ms},
            once=f"{gen}:unknown_outcome:{key}:{entry.attempt}",
        )
        for key, entry in session.ledger.items()
        if entry.status == "started" and entry.by in (None, sid)
    ]


def derive(session: Any, now_ms: float, row: StoredRow | None = None) -> list[Written]:
    """The notifications a save of ``session`` writes (``row``: the save's encoded row, when
    the store has it at hand).

    Payload fields (raw): ``kind``, ``session_id``, ``agent``, ``created_ms``, ``reason``
    (why the session waits), ``tasks`` (the tool calls concerned, as the session keeps
    them), ``approval`` (a graph approval concerned: ``id``, ``request``, ``deadline_ms``,
    ``policy``), ``items`` (other interrupts, by id), ``given`` (approvals recorded so far,
    per call), ``roles`` (who else is told: an escalation's), ``detail`` (the verdict and
    reviewer of a decision, an expiry's resolution, the effect of unknown outcome)."""
    log = session.events
    out: list[Written] = []
    drafts: list[_Draft] = []
    pause: tuple[int, str | None] | None = None  # (seq, graph approval id) of a pause
    events, kinds = log.since(log.first_new_seq, EVENT_RULES)
    for event in events:
        kind = EVENT_RULES[event.kind](event)
        if kind == "pending":
            pause = (event.seq, f"approval-{event.seq}")
        elif kind is not None:
            drafts.append(_from_event(session, kind, event))
    if pause is None and session.is_pending and _ran(log, kinds):
        # a run paused with no event saying so (a graph run by the engine alone, or a log
        # kept off): the console names such an approval by the last pausing end event
        pause = (log.next_seq, None)
    noted = audit.noted(session)
    if pause is None and session.is_pending and any(e.action == _REWRITTEN for e in noted):
        # a migration rewrote a waiting call (R62): it waits under a new UUID with other
        # arguments and nothing ran to say so — the reviewer is told of it as a new pause
        pause = (log.next_seq, None)
    if pause is not None and session.is_pending:
        out.append(_pause(session, row or row_of(session), pause, now_ms))
    for entry in noted:
        kind = AUDIT_RULES.get(entry.action)
        if kind is not None:
            drafts.append(_from_audit(session, kind, entry))
    if session.ledger:
        drafts += _unknown_outcomes(session)
    if drafts:
        out += _written(session, drafts, now_ms)
    extra = getattr(session, "outbox_extra", None)
    if callable(extra):  # a surface's own rows in this save's commit (a reply handle)
        out += extra(session)
    if session.meta and session.meta.get(REPLIES):  # (a dict lookup for every other save)
        out += _replies(session, session.meta[REPLIES], now_ms)
    return out


def _replies(session: Any, handles: Any, now_ms: float) -> list[Written]:
    """Updates of messages people acted on, for the interrupts whose outcome is final in
    this save. ``handles`` (``session.meta["replies"]``, no URL): interrupt id →
    ``session`` (whose interrupt: a fork carries its parent's meta), ``target``, ``handle``
    (the key of the outbox row that holds where to send the update, see
    :attr:`~intermission.stores.outbox.Written.held_until`), ``until_ms`` (when the handle
    expires), ``after`` (the log seq of the click: only a decision from there on is the
    message's). One row per outcome: its key and ``once`` mark are made from the target,
    the thread, the handle, the interrupt and the outcome, so a later save seeing it again
    writes nothing, and every retry sends the same key; the handle is dropped once told.
    The message's words are made when it is sent."""
    from ..outcomes import deciders_of, final_outcome

    if not isinstance(handles, dict):
        return []
    sid = session.session_id
    out = []
    for iid, h in list(handles.items()):
        if not isinstance(h, dict) or h.get("session") != sid:
            continue
        after = h.get("after")
        found = final_outcome(session, iid, after if isinstance(after, int) else None)
        if found is None:
            continue
        # (the handle's own key in the mark: a thread deleted and made again under the same
        # id numbers its log and its calls anew; its messages are other messages)
        mark = f"reply:{h.get('target')}:{sid}:{h.get('handle')}:{iid}:{found['mark']}"
        if float(h.get("until_ms") or 0) < now_ms:
            log.info("the message where interrupt %s of session %s was acted on can no "
                     "longer be updated (its reply handle expired): not updated", iid, sid)
            del handles[iid]  # (gone from the session's next save)
            continue
        key = "ntf_" + hashlib.sha256(mark.encode()).hexdigest()[:32]
        tool = found.get("tool")
        deciders = [d.get("name") for d in deciders_of(found)]
        payload = {
            "kind": "decided", "session_id": sid, "agent": session.agent,
            "created_ms": now_ms, "reason": None, "tasks": [], "approval": None,
            "items": [{"id": iid, "type": "tool_call" if tool else "confirmation",
                       "tool": tool}],
            "given": None, "roles": [],
            "detail": {"verdict": "expired" if found["expired"] else found["verdict"],
                       "reviewer": ", ".join(n for n in deciders if n) or None},
            "reply": {"target": h.get("target"), "handle": h.get("handle"),
                      "outcome": found},
        }  # fmt: skip
        out.append(Written(key, sid, "decided", canonical_dumps(payload), once=mark))
        del handles[iid]  # (told: a later call given the same id is not this message's)
    return out


# (recorded by a decision, a vote or the deadline sweeper: nothing ran)
_NOT_A_RUN = frozenset({
    "approval_decided", "approval_voted", "approval_warned", "approval_escalated",
    "approval_expired",
})  # fmt: skip


def _ran(log: Any, kinds: set[str]) -> bool:
    """Whether something ran since the session was loaded or saved."""
    if log.max_events == 0:  # no log kept: whatever numbered an event
        return bool(log.next_seq > log.first_new_seq)
    return bool(kinds - _NOT_A_RUN)


_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def _text(value: Any) -> str:
    return "null" if value is None else _ENCODE(value)


def _pause(session: Any, row: StoredRow, pause: tuple[int, str | None], now_ms: float) -> Written:
    """The notification of a pause: what the session waits on, put together from what the
    save encoded already (its undecided tasks, its graph approval's request). A run that
    stops again on calls still undecided is told again: a reminder."""
    approval = "null"
    if row.tasks_json == "[]":  # a graph approval (or a pause of the session's own)
        seq, approval_id = pause
        policy = session.context.get("approval.policy")
        approval = (
            f'{{"deadline_ms":{_text(row.deadline_ms)},'
            f'"id":{_text(approval_id or _last_pause_id(session, seq + 1))},'
            f'"policy":{canonical_dumps(policy) if isinstance(policy, dict) else "null"},'
            f'"request":{row.request_json}}}'
        )
    given = _given(session)
    payload = (
        f'{{"agent":{_text(row.agent)},"approval":{approval},"created_ms":{now_ms!r},'
        f'"detail":{{}},"given":{canonical_dumps(given) if given else "null"},'
        f'"items":[],"kind":"pending","reason":{_text(row.reason)},"roles":[],'
        f'"session_id":{_text(row.session_id)},"tasks":{row.tasks_json}}}'
    )
    return Written(new_key(), row.session_id, "pending", payload)


def _written(session: Any, drafts: list[_Draft], now_ms: float) -> list[Written]:
    sid = session.session_id
    given = _given(session)
    out = []
    seen: set[tuple[str, tuple[Any, ...]]] = set()
    for d in drafts:
        # one notification per kind and interrupt in a save (an expiry noted and logged)
        ids = tuple(t["call_uuid"] for t in d.tasks) + tuple(i["id"] for i in d.items)
        mark = (d.kind, ids or (d.once or id(d),))
        if mark in seen:
            continue
        seen.add(mark)
        payload = {
            "kind": d.kind, "session_id": sid, "agent": session.agent, "created_ms": now_ms,
            "reason": None, "tasks": d.tasks, "approval": None, "items": d.items,
            "given": given, "roles": d.roles, "detail": d.detail,
        }  # fmt: skip
        out.append(Written(new_key(), sid, d.kind, canonical_dumps(payload), d.once))
    return out
