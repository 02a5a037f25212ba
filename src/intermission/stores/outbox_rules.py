"""How a save's notifications are derived: from what the save adds — the events the core
appended since the session was loaded (or last saved) and the audit entries noted on it —
by the two tables below (a new kind of event or audit action is one line). The core never
knows: it emits events and notes audit entries; the store reads them here, in the save.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import audit
from .._json import canonical_dumps
from .outbox import Written, new_key

__all__ = ["AUDIT_RULES", "EVENT_RULES", "derive", "summarize"]

_DEADLINE = "system:deadline"  # (hitl.graph.DEADLINE_REVIEWER: a decision the clock took)

EVENT_RULES: dict[str, Callable[[Any], str | None]] = {
    "hitl_pending": lambda e: "pending",
    "run_end": lambda e: "pending" if e.pending else None,
    "team_end": lambda e: "pending" if e.pending else None,
    "hitl_decided": lambda e: None if e.decision.reviewer == _DEADLINE else "decided",
    "approval_decided": lambda e: "expired" if e.reviewer == _DEADLINE else "decided",
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


# -- argument summaries: bounded, secrets left out ----------------------------------------
_SECRET = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[-_]?key|auth|cookie|credential|private[-_]?key"
    r"|signature|session[-_]?key|otp|pin$",
    re.IGNORECASE,
)
_TEXT = 200
_ITEMS = 10
_DEPTH = 3
_BUDGET = 2000


def _cut(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= _TEXT else f"{value[:_TEXT]}… (+{len(value) - _TEXT} chars)"
    if isinstance(value, dict):
        if depth >= _DEPTH:
            return f"{{{len(value)} keys}}"
        items = list(value.items())
        out = {
            str(k)[:_TEXT]: "[redacted]" if _SECRET.search(str(k)) else _cut(v, depth + 1)
            for k, v in items[:_ITEMS]
        }
        if len(items) > _ITEMS:
            out["…"] = f"+{len(items) - _ITEMS} keys"
        return out
    if isinstance(value, (list, tuple)):
        if depth >= _DEPTH:
            return f"[{len(value)} items]"
        out_list = [_cut(v, depth + 1) for v in value[:_ITEMS]]
        if len(value) > _ITEMS:
            out_list.append(f"… +{len(value) - _ITEMS} items")
        return out_list
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return f"<{type(value).__name__}>"


def summarize(args: dict[str, Any]) -> dict[str, Any]:
    """Tool arguments as a notification shows them: values cut to 200 characters, at most
    10 keys or items per level and 3 levels, arguments whose name says secret (password,
    token, api_key, …) redacted, about 2 KB at most in all."""
    out = _cut(args, 0)
    if not isinstance(out, dict):
        return {}
    # (a character is at most 6 in JSON, \uXXXX: a short repr needs no exact count)
    if len(repr(out)) * 6 <= _BUDGET or len(canonical_dumps(out)) <= _BUDGET:
        return out
    kept: dict[str, Any] = {}
    size = 2
    for name, value in out.items():  # the first keys, as many as fit, each at most whole
        item = len(canonical_dumps({name: value}))
        if size + item > _BUDGET - 80:
            break
        kept[name] = value
        size += item
    kept["…"] = f"cut: {len(out) - len(kept)} more argument(s), too long to show here"
    return kept


# -- derivation ---------------------------------------------------------------------------
def _policy(task: Any, hitl: Any) -> dict[str, Any] | None:
    """What an approval policy still needs, read defensively from a task (or a graph
    approval's context): roles, approvals, who may decide."""
    policy = getattr(task, "policy", None)
    data: dict[str, Any] = {}
    if policy is not None:
        dumped = policy.model_dump(mode="json") if hasattr(policy, "model_dump") else policy
        if isinstance(dumped, dict):
            data = {
                k: v
                for k, v in dumped.items()
                if v is None
                or isinstance(v, (str, int, float, bool))
                or (isinstance(v, list) and all(isinstance(x, str) for x in v))
            }
    approvers = getattr(task, "approvers", None)
    if approvers:
        data["reviewers"] = sorted(str(a) for a in approvers)
    if not data:
        return None
    approvals = data.get("approvals")
    if isinstance(approvals, int) and not isinstance(approvals, bool):
        given = _given(hitl, getattr(task, "call_uuid", None))
        data["approvals_needed"] = max(0, approvals - given)
    return data


def _given(hitl: Any, call_uuid: str | None) -> int:
    """Distinct approvals recorded so far for a task (where the state keeps them)."""
    found = getattr(hitl, "approvals", None) if hitl is not None else None
    if isinstance(found, dict) and call_uuid is not None:
        found = found.get(call_uuid)
    return len(set(map(str, found))) if isinstance(found, (list, tuple, set)) else 0


def _roles(policy: dict[str, Any] | None) -> list[str]:
    roles = (policy or {}).get("roles")
    return [str(r) for r in roles] if isinstance(roles, list) else []


def _task_interrupt(task: Any, hitl: Any) -> dict[str, Any]:
    policy = _policy(task, hitl)
    return {
        "id": task.call_uuid, "type": "tool_call", "tool": task.tool_name,
        "arguments": summarize(task.args), "reason": task.reason,
        "deadline_ms": task.deadline_ms, "policy": policy,
    }  # fmt: skip


def _open_interrupts(session: Any, approval_id: str) -> list[dict[str, Any]]:
    """The interrupts a paused session waits on: its undecided tool calls, or its graph
    approval (``approval-<seq>`` of the end event that paused, as the console names it)."""
    hitl = session.hitl
    tasks = [t for t in hitl.tasks if t.call_uuid not in hitl.decisions]
    if tasks:
        return [_task_interrupt(t, hitl) for t in tasks]
    from ..hitl.graph import approval_deadline

    request = session.context.get("approval.request")
    policy_data = session.context.get("approval.policy")
    policy = _policy(_Graph(policy_data), None) if isinstance(policy_data, dict) else None
    return [{
        "id": approval_id, "type": "confirmation", "tool": None,
        "arguments": summarize({"request": request}) if request is not None else {},
        "reason": session.pending_reason, "deadline_ms": approval_deadline(session),
        "policy": policy,
    }]  # fmt: skip


@dataclass
class _Graph:
    policy: Any
    approvers: Any = None


def _task(session: Any, call_uuid: str | None) -> Any:
    for task in session.hitl.tasks:
        if task.call_uuid == call_uuid:
            return task
    return None


@dataclass
class _Draft:
    kind: str
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    roles: list[str] = field(default_factory=list)
    once: str | None = None
    """Told only once, whatever saves derive it again (see Written.once)."""


def _from_event(session: Any, kind: str, event: Any) -> _Draft:
    if event.kind in ("hitl_decided", "hitl_expired"):
        task = _task(session, event.call_uuid)
        item = (
            _task_interrupt(task, session.hitl)
            if task is not None
            else {"id": event.call_uuid, "type": "tool_call", "tool": event.tool_name}
        )
        detail: dict[str, Any] = {}
        if event.kind == "hitl_decided":
            record = event.decision
            detail = {"verdict": record.verdict, "reviewer": record.reviewer,
                      "comment": record.comment}  # fmt: skip
        else:
            detail = {"resolution": event.resolution}
        return _Draft(kind, [item], detail, _roles(item.get("policy")))
    # a graph approval's decision
    detail = {"verdict": event.verdict.lower(), "reviewer": event.reviewer,
              "reason": event.reason, "comment": event.comment}  # fmt: skip
    item = {"id": _last_pause_id(session, event.seq), "type": "confirmation", "tool": None}
    return _Draft(kind, [item], detail)


_ENDS = frozenset({"run_end", "team_end"})


def _last_pause_id(session: Any, before: int) -> str:
    """The console's id of a graph approval: ``approval-<seq>`` of the last end event
    that paused (``approval-0``: none did)."""
    event = session.events.last(_ENDS, before, lambda e: e.pending)
    return f"approval-{event.seq}" if event is not None else "approval-0"


def _from_audit(session: Any, kind: str, entry: Any) -> _Draft:
    target = entry.target
    task = _task(session, target)
    if task is not None:
        item = _task_interrupt(task, session.hitl)
    else:
        item = {"id": target, "type": "confirmation" if target else None}
    detail: dict[str, Any] = {"action": entry.action, "reason": entry.reason}
    if entry.actor:
        detail["actor"] = entry.actor
    roles = _roles(item.get("policy"))
    extra = entry.detail.get("roles") if isinstance(entry.detail, dict) else None
    if isinstance(extra, list):  # an escalation names who is told now
        roles = sorted({*roles, *map(str, extra)})
    interrupts = [item] if target else []
    return _Draft(kind, interrupts, detail, roles)


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


def derive(session: Any, now_ms: float) -> list[Written]:
    """The notifications a save of ``session`` writes (see the module docstring).

    Payload fields: ``kind``, ``session_id``, ``agent``, ``created_ms``, ``reason`` (why the
    session waits), ``deadline_ms`` (the earliest of its interrupts), ``interrupts`` (each
    ``id``, ``type``, ``tool``, ``arguments`` summary, ``reason``, ``deadline_ms``,
    ``policy``: roles, approvals still needed), ``roles`` (who can decide: routing),
    ``detail`` (the verdict and reviewer of a decision, an expiry's resolution, the effect
    of unknown outcome)."""
    log = session.events
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
    if pause is not None and session.is_pending:
        drafts.insert(0, _pause(session, *pause))
    for entry in audit.noted(session):
        kind = AUDIT_RULES.get(entry.action)
        if kind is not None:
            drafts.append(_from_audit(session, kind, entry))
    if session.ledger:
        drafts += _unknown_outcomes(session)
    return _written(session, _unique(drafts), now_ms)


_NOT_A_RUN = frozenset({"approval_decided"})  # (recorded by a decision: nothing ran)


def _ran(log: Any, kinds: set[str]) -> bool:
    """Whether something ran since the session was loaded or saved."""
    if log.max_events == 0:  # no log kept: whatever numbered an event
        return bool(log.next_seq > log.first_new_seq)
    return bool(kinds - _NOT_A_RUN)


def _pause(session: Any, seq: int, approval_id: str | None) -> _Draft:
    """The notification of a pause: what the session waits on (a run that stops again on
    calls still undecided is told again: a reminder)."""
    interrupts = _open_interrupts(session, approval_id or _last_pause_id(session, seq + 1))
    roles = sorted({r for i in interrupts for r in _roles(i.get("policy"))})
    return _Draft("pending", interrupts, roles=roles)


def _unique(drafts: list[_Draft]) -> list[_Draft]:
    """One notification per kind and interrupt in a save (an expiry both noted and
    logged is told once)."""
    if len(drafts) < 2:
        return list(drafts)
    seen: set[tuple[str, tuple[Any, ...]]] = set()
    out = []
    for d in drafts:
        mark = (d.kind, tuple(i.get("id") for i in d.interrupts) or (d.once or id(d),))
        if mark not in seen:
            seen.add(mark)
            out.append(d)
    return out


def _written(session: Any, drafts: list[_Draft], now_ms: float) -> list[Written]:
    if not drafts:
        return []
    sid = session.session_id
    out = []
    for d in drafts:
        deadlines = [i["deadline_ms"] for i in d.interrupts if i.get("deadline_ms") is not None]
        payload = {
            "kind": d.kind, "session_id": sid, "agent": session.agent, "created_ms": now_ms,
            "reason": session.pending_reason if d.kind == "pending" else None,
            "deadline_ms": min(deadlines) if deadlines else None,
            "interrupts": d.interrupts, "roles": d.roles, "detail": d.detail,
        }  # fmt: skip
        out.append(Written(new_key(), sid, d.kind, canonical_dumps(payload), d.once))
    return out
