"""What a session says about its decisions and its last answer, read from its events, so a
view can tell who decided what and when whoever did it (a click here, another widget, the
CLI, another kernel) (R51)."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..agents.request import AgentResponse
from ..principals import label
from ._html import esc

__all__ = ["decided_html", "decisions_of", "label", "outcome_of", "when", "who_html"]


def who_html(
    name: str | None, display: str | None = None, timed_out: bool = False, votes: Any = ()
) -> str:
    """Who decided, as HTML: the decider (escaped), the deadline for a timeout, and the
    principals of a quorum."""
    if timed_out:
        return "<i>nobody: timed out</i>"
    who = f"<b>{esc(label(name, display))}</b>" if name else "<i>no reviewer named</i>"
    names = [v.name for v in votes or ()]
    if len(names) > 1:
        who += f" <i>({esc(' and '.join(names))})</i>"
    return who


def when(ms: float) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS UTC``."""
    stamp = _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


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


def decided_html(session: Any) -> str:
    """One line per decision: ``APPROVE by bob at … — comment``; empty when none."""
    lines = []
    for d in decisions_of(session):
        tool = f"{esc(d['tool'])}: " if d["tool"] else ""
        who = who_html(d["reviewer"], d.get("display"), d.get("timed_out", False), d.get("votes"))
        note = d["reason"] or d["comment"]
        lines.append(
            f"{tool}<b>{esc(str(d['verdict']).upper())}</b> by {who} at {esc(when(d['at']))}"
            + (f" — {esc(note)}" if note else "")
        )
    return "<br>".join(lines)


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
