"""What became of a session's approvals, as plain data read from its events and ledger:
who decided each (every voter of a quorum), approved or rejected and why, and what ran —
the tool and the arguments it ran with, its result or its error. Every surface that tells
a person what happened (the console, a notebook view, a chat message) reads it from here,
so they all tell the same story (R63)."""

from __future__ import annotations

from typing import Any

__all__ = ["approval_outcomes", "deciders_of", "decisions_of", "final_outcome"]

_DEADLINE = "system:deadline"  # (hitl.approval_keys.DEADLINE_REVIEWER)
_ENDS = ("run_end", "team_end")


def decisions_of(session: Any) -> list[dict[str, Any]]:
    """The decisions of the session's last decided request, oldest first: verdict,
    reviewer, time, reason or comment, and the tool for a tool call."""
    found: list[dict[str, Any]] = []
    for e in reversed(list(getattr(session, "events", []))):
        if e.kind == "approval_decided":
            found.append({"verdict": e.verdict, "reviewer": e.reviewer, "at": e.ts,
                          "reason": e.reason, "comment": e.comment, "tool": None,
                          "display": getattr(e, "display", None),
                          "timed_out": getattr(e, "timed_out", False),
                          "votes": getattr(e, "votes", [])})  # fmt: skip
        elif e.kind == "hitl_decided":
            d = e.decision
            found.append({"verdict": d.verdict, "reviewer": d.reviewer, "at": d.time_ms,
                          "reason": d.comment if d.verdict == "reject" else None,
                          "comment": None if d.verdict == "reject" else d.comment,
                          "tool": e.tool_name, "display": d.display, "timed_out": d.timed_out,
                          "votes": d.votes})  # fmt: skip
        elif found and e.kind in ("run_start", "team_start"):
            break  # the decisions of one resume sit together
    return found[::-1]


def _deciders(
    reviewer: str | None, roles: Any, via: Any, display: str | None, at: Any, votes: Any
) -> list[dict[str, Any]]:
    """Who decided: each voter of a quorum, else the one decider (none for a timeout
    with nobody named)."""
    if votes:
        return [{"name": v.name, "roles": list(v.roles), "via": v.via, "display": v.display,
                 "verdict": str(v.verdict).lower(), "atMs": v.time_ms} for v in votes]  # fmt: skip
    if reviewer is None:
        return []
    return [{"name": reviewer, "roles": list(roles or ()), "via": via, "display": display,
             "atMs": at}]  # fmt: skip


def deciders_of(outcome: dict[str, Any]) -> list[dict[str, Any]]:
    """Who made an outcome what it is: the voters of its verdict (a quorum's voter of the
    other verdict did not decide it), else every decider named."""
    verdict = outcome.get("verdict")
    deciders = list(outcome.get("deciders") or ())
    if verdict is None:
        return deciders
    return [d for d in deciders if d.get("verdict", verdict) == verdict]


def _ran_of_call(events: list[Any], seq: int, call_uuid: str) -> dict[str, Any] | None:
    """The run of the approved tool call after its decision (``seq``): its tool, the
    arguments it ran with, its result or error (None: it has not run yet)."""
    for e in events:
        if e.seq > seq and e.kind == "tool_call_end" and e.call_uuid == call_uuid:
            return {"tool": e.tool_name, "args": dict(e.args), "result": e.observation,
                    "error": e.error}  # fmt: skip
    return None


def _graph_effects(session: Any, events: list[Any]) -> dict[int, list[dict[str, Any]]]:
    """The effects each graph decision authorised (from the ledger), by the seq of its
    ``approval_decided`` event. An effect's approval keeps the decision's time key
    (whole milliseconds, read before its event was stamped), so it belongs to the first
    graph decision stamped at or after that time — not to one within a millisecond of it,
    which a loaded machine can miss."""
    stamps = [(e.ts, e.seq) for e in events if e.kind == "approval_decided"]
    out: dict[int, list[dict[str, Any]]] = {}
    for key, entry in sorted(getattr(session, "ledger", {}).items()):
        approval = entry.approval
        if approval is None or approval.tool_name is not None or approval.decided_ms is None:
            continue
        seq = next((seq for ts, seq in stamps if ts >= approval.decided_ms), None)
        if seq is not None:
            ran = {"effect": key, "status": entry.status, "result": entry.result,
                   "error": entry.error}  # fmt: skip
            out.setdefault(seq, []).append(ran)
    return out


def _answer_after(events: list[Any], seq: int, agent: str | None) -> dict[str, Any] | None:
    """The answer of the run that went on after the decision at ``seq`` (None: none yet,
    or it paused again)."""
    for e in events:
        if e.seq <= seq or e.kind not in ("run_end", "team_end"):
            continue
        if agent is not None and getattr(e, "agent", agent) != agent:
            continue  # (a team member's own run)
        if getattr(e, "pending", False):
            return None
        return {"content": e.content, "abnormal": bool(e.is_abnormal)}
    return None


def approval_outcomes(session: Any) -> list[dict[str, Any]]:
    """Every decided approval of the session, oldest first, as JSON-ready data.

    Each holds ``seq`` (the log event that applied the decision), ``callId`` (the tool
    call's id; None for a graph approval), ``tool`` and ``args`` (what was asked),
    ``verdict`` (``approve``/``reject``), ``reason`` (a rejection's), ``comment``,
    ``atMs``, ``timedOut``, ``deciders`` (each voter: name, roles, via, display),
    ``ran`` (the tool call as it ran, with its ``result`` or ``error``; None when it was
    rejected or has not run yet), ``effects`` (a graph approval's effects from the
    ledger) and ``answer`` (the run's answer after it, when it finished)."""
    events = list(getattr(session, "events", []))
    agent = getattr(session, "agent", None)
    effects = _graph_effects(session, events)
    out: list[dict[str, Any]] = []
    for e in events:
        if e.kind == "hitl_decided":
            d = e.decision
            verdict = str(d.verdict).lower()
            out.append({
                "seq": e.seq, "callId": e.call_uuid, "tool": e.tool_name, "args": dict(e.args),
                "editedArgs": d.modified_args, "verdict": verdict,
                "reason": d.comment if verdict == "reject" else None,
                "comment": None if verdict == "reject" else d.comment,
                "atMs": d.time_ms, "timedOut": bool(d.timed_out),
                "deciders": _deciders(d.reviewer, d.roles, d.via, d.display, d.time_ms, d.votes),
                "ran": _ran_of_call(events, e.seq, e.call_uuid) if verdict == "approve" else None,
                "effects": [], "answer": _answer_after(events, e.seq, agent),
            })  # fmt: skip
        elif e.kind == "approval_decided":
            verdict = str(e.verdict).lower()
            out.append({
                "seq": e.seq, "callId": None, "tool": None, "args": None, "editedArgs": None,
                "verdict": verdict, "reason": e.reason, "comment": e.comment, "atMs": e.ts,
                "timedOut": bool(e.timed_out),
                "deciders": _deciders(e.reviewer, e.roles, e.via, e.display, e.ts, e.votes),
                "ran": None,
                "effects": effects.get(e.seq, []) if verdict == "approve" else [],
                "answer": _answer_after(events, e.seq, agent),
            })  # fmt: skip
    return out


def _expired(found: dict[str, Any]) -> bool:
    return bool(found["timedOut"]) or any(d["name"] == _DEADLINE for d in found["deciders"])


def final_outcome(session: Any, iid: str, after: int | None = None) -> dict[str, Any] | None:
    """What became of interrupt ``iid`` once it is final, else None (undecided, a vote of
    a quorum, approved and not run yet). An :func:`approval_outcomes` entry plus ``mark``
    (names the outcome alike for every save that sees it: ``expired``, or the verdict and
    the seq of its decision), ``expired`` and, for a graph approval, ``request`` and
    ``end`` (the run that went on: ``error``, ``pending``, ``content``).

    Final: a rejection or an expiry (a tool call's, from the decision the deadline
    recorded, before any run applies it), an approved call once it ran, a graph approval
    once the run it let go on ended. ``after``: a log seq; only a decision made from there
    on counts (a model may give a later request's call the same id)."""
    if iid.startswith("approval-") and not any(t.call_uuid == iid for t in session.hitl.tasks):
        return _final_graph(session, iid)
    calls = [o for o in approval_outcomes(session)
             if o["callId"] == iid and (after is None or o["seq"] >= after)]  # fmt: skip
    if not calls:  # the deadline decided it and no run applied that yet
        record = session.hitl.decisions.get(iid)
        if record is None or not record.timed_out or record.verdict != "reject":
            return None
        task = next((t for t in session.hitl.tasks if t.call_uuid == iid), None)
        votes = [{"name": v.name, "roles": list(v.roles), "via": v.via, "display": v.display,
                  "verdict": str(v.verdict).lower(), "atMs": v.time_ms}
                 for v in record.votes]  # fmt: skip
        return {"seq": None, "callId": iid, "tool": record.tool_name,
                "args": dict(task.args) if task is not None else None, "editedArgs": None,
                "verdict": "reject", "reason": None, "comment": record.comment,
                "atMs": record.time_ms, "timedOut": True, "deciders": votes, "ran": None,
                "effects": [], "answer": None, "mark": "expired", "expired": True}  # fmt: skip
    # (the first from ``after``: the one the click took part in; without it the last, a
    # forgotten effect's call being decided again)
    found = calls[0] if after is not None else calls[-1]
    expired = _expired(found) and found["verdict"] == "reject"
    if found["verdict"] == "approve" and found["ran"] is None:
        return None
    mark = "expired" if expired else f"{found['verdict']}:{found['seq']}"
    return {**found, "mark": mark, "expired": expired}


def _final_graph(session: Any, iid: str) -> dict[str, Any] | None:
    try:
        asked = int(iid.rpartition("-")[2])
    except ValueError:
        return None
    # the first graph decision after the request (the interrupt's id is its seq)
    found = next((o for o in approval_outcomes(session)
                  if o["callId"] is None and o["seq"] > asked), None)  # fmt: skip
    if found is None:
        return None
    request = session.context.get("approval.request")
    if _expired(found) and found["verdict"] == "reject":
        return {**found, "mark": "expired", "expired": True, "request": request, "end": None}
    end = next((e for e in session.events if e.seq > found["seq"] and e.kind in _ENDS), None)
    if end is None:
        return None
    ended = {"error": end.error, "pending": bool(end.pending), "content": end.content}
    return {**found, "mark": f"{found['verdict']}:{found['seq']}", "expired": False,
            "request": request, "end": ended}  # fmt: skip
