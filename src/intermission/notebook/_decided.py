"""What a session says about its decisions and its last answer, read from its events, so a
view can tell who decided what and when whoever did it (a click here, another widget, the
CLI, another kernel) (R51)."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..agents.request import AgentResponse
from ..hitl.expiry import THE_DEADLINE, by_deadline
from ..outcomes import decisions_of
from ..principals import label
from ._html import esc, short_id

__all__ = [
    "decided_html", "decision_html", "decisions_of", "lost_html", "outcome_data", "outcome_of",
    "progress_line", "when", "who_html",
]  # fmt: skip


def who_html(
    name: str | None, display: str | None = None, timed_out: bool = False, votes: Any = ()
) -> str:
    """Who decided, as HTML: the decider (escaped), the deadline for a timeout, and the
    principals of a quorum."""
    if by_deadline(name, timed_out):  # an expiry: the deadline decided, as every view says
        return f"<i>{THE_DEADLINE}</i>"
    who = f"<b>{esc(label(name, display))}</b>" if name else "<i>no reviewer named</i>"
    names = [v.name for v in votes or ()]
    if len(names) > 1:
        who += f" <i>({esc(' and '.join(names))})</i>"
    return who


def when(ms: float) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS UTC``."""
    stamp = _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def decision_html(d: dict[str, Any]) -> str:
    """One decision (of :func:`decisions_of`): ``delete_user: APPROVE by bob at …``."""
    tool = f"{esc(d['tool'])}: " if d["tool"] else ""
    who = who_html(d["reviewer"], d.get("display"), d.get("timed_out", False), d.get("votes"))
    at = f" at {esc(when(d['at']))}" if d["at"] is not None else ""
    return f"{tool}<b>{esc(str(d['verdict']).upper())}</b> by {who}{at}"


def decided_html(session: Any) -> str:
    """One line per decision: ``APPROVE by bob at … — comment``; empty when none."""
    lines = []
    for d in decisions_of(session):
        note = d["reason"] or d["comment"]
        lines.append(decision_html(d) + (f" — {esc(note)}" if note else ""))
    return "<br>".join(lines)


def lost_html(verb: str, session: Any, error: BaseException | None = None) -> str:
    """What a click that lost the race to another decision says: ``Your Reject was not
    recorded: APPROVE by carol at … came first.`` The winner is the one a
    DecisionConflictError names (recorded, maybe not applied yet), else the decisions the
    session applied last; empty when there is none."""
    from ..errors import DecisionConflictError

    if isinstance(error, DecisionConflictError):
        found = [{"verdict": error.verdict, "reviewer": error.reviewer, "tool": None,
                  "at": error.time_ms}]  # fmt: skip
    else:
        found = decisions_of(session)
    if not found:
        return ""
    won = "; ".join(decision_html(d) for d in found)
    return f"<div class='im-lost'>Your {esc(verb)} was not recorded: {won} came first.</div>"


def progress_line(session: Any) -> str:
    """The approval policy's progress on the open decision, one line of plain text (say
    "1 of 2 approvals (alice, sre) — waiting for one more from sre"); empty when there is
    nothing to say. Widgets show it when it is not empty.

    The words are the policy's own (``HITL.progress``), as every other surface shows them
    (escalated ones say so); a batch of several tool calls names each call it speaks of.
    An approval without a policy says nothing."""
    if not getattr(session, "is_pending", False):
        return ""
    from ..hitl import HITL

    tasks = list(session.hitl.tasks)
    if tasks:
        decided = session.hitl.decisions
        lines = []
        for task in tasks:
            if task.policy is None or task.call_uuid in decided:
                continue
            found = HITL.progress(session, task.call_uuid)
            if found is None:
                continue
            name = f"{task.tool_name} ({short_id(task.call_uuid)}): " if len(tasks) > 1 else ""
            lines.append(name + found.text)
        return "; ".join(lines)
    if session.hitl.approval_keys is None:
        return ""
    found = HITL.progress(session)
    if found is None or session.context.get(found.target) is not None:
        return ""  # decided: the status line says by whom
    return found.text


def outcome_data(session: Any, response: Any = None) -> dict[str, Any]:
    """What a session came to, as plain data for a widget's ``outcome`` trait: its status,
    what it waits for (and its approval policy's progress), the decisions of its last
    decided request (with the votes of a quorum) and its answer (None while it waits)."""
    answer = response if response is not None else outcome_of(session)
    if session.is_pending:
        answer = None
    return {
        "session_id": session.session_id,
        "status": session.status,
        "pending": bool(session.is_pending),
        "waiting_for": session.pending_reason if session.is_pending else None,
        "decisions": [
            {
                **d,
                "verdict": str(d["verdict"]).upper(),
                "at": when(d["at"]),
                "votes": [v.model_dump(mode="json") for v in d.get("votes") or ()],
            }
            for d in decisions_of(session)
        ],
        "progress": progress_line(session),
        "answer": getattr(answer, "content", None) if answer is not None else None,
    }


def outcome_of(session: Any) -> AgentResponse | None:
    """The answer of the session's last finished request, as a response (None before any)."""
    events = list(getattr(session, "events", []))
    agent = getattr(session, "agent", None)
    ends = [e for e in events if e.kind in ("run_end", "team_end")]
    # the outer request's end (a team's members end their own runs inside it)
    own = [e for e in ends if agent is None or e.agent == agent] or ends
    if not own:
        return None
    e = own[-1]
    return AgentResponse(e.content, e.is_abnormal, None, session)
