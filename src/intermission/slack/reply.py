"""The update of a Slack message a person clicked: what became of the approval (who
decided, approved or rejected, what ran and its result or error), buttons gone.

It is an outbox row (at least once: the dispatcher retries it), written by the save that
records the outcome, in that save's transaction: :func:`reply_hook` is hung on the session
the decision holds the claim of (``outbox_extra``, read by
:func:`~intermission.stores.outbox_rules.derive`). One row per outcome: its key and its
``once`` mark are made from the thread, the interrupt and the decision, so a later save of
the same outcome writes nothing, and a retried delivery sends the same bytes with the same
key (Slack replaces the message with the same one).

The outcome is final when written: a rejection (in the commit that records it), an
approval once the run that applied it ended (in that run's save). An interim "approved,
running" update is not sent: delivered after a retry it could overwrite the final one
(Slack has no conditional update). So a server that dies after committing an approval and
before its run ends leaves the message as it was: the approval is resumed as any (the
console, ``intermission resume``), and a later click on the message is answered that the
approval no longer waits, naming its decision."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from .._json import canonical_dumps
from .._text import visible
from ..notify.interrupts import summarize
from ..notify.redact import redact_text
from ..outcomes import approval_outcomes
from ..principals import label
from ..stores.outbox import Written

__all__ = ["Outcome", "outcome_of", "reply_hook"]

_RESULT = 1500
"""How much of a result or an error the message shows (characters)."""
_ENDS = ("run_end", "team_end")


class Outcome:
    """What became of one interrupt: ``phase`` (``decided`` or ``done``), ``mark`` (the
    decision it is about) and the words."""

    def __init__(self, phase: str, mark: str, approved: bool, who: str, what: str,
                 after: str) -> None:  # fmt: skip
        self.phase, self.mark, self.approved = phase, mark, approved
        self.who, self.what, self.after = who, what, after

    @property
    def line(self) -> str:
        """One line: ``Approved by alice (via Slack): delete_user(…) — ran: …``."""
        verdict = "Approved" if self.approved else "Rejected"
        return visible(f"{verdict} by {self.who}: {self.what} — {self.after}")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call(tool: str, args: Any) -> str:
    shown = summarize(args) if isinstance(args, dict) else {}
    inner = ", ".join(f"{k}={_short(v, 80)}" for k, v in shown.items())
    return f"{tool}({inner})"


def _who(found: dict[str, Any]) -> str:
    names = [label(d["name"], d["display"]) for d in found["deciders"]]
    return " and ".join(n for n in names if n) or "an unnamed reviewer"


def _call_words(session: Any, found: dict[str, Any]) -> Outcome:
    """A tool call's outcome in words: done once it was rejected or the call ran."""
    mark, approved = f"{found['verdict']}:{found['seq']}", found["verdict"] == "approve"
    what = _call(found["tool"] or "the call", found["editedArgs"] or found["args"])
    if not approved:
        why = f"reason: {_short(found['reason'])}" if found["reason"] else "it did not run"
        return Outcome("done", mark, False, _who(found), what, why)
    ran = found["ran"]
    if ran is None:
        return Outcome("decided", mark, True, _who(found), what, "running…")
    if ran["error"]:
        return Outcome("done", mark, True, _who(found), what,
                       f"failed: {_short(ran['error'], _RESULT)}")  # fmt: skip
    result = _short(ran["result"] or "", _RESULT)
    return Outcome("done", mark, True, _who(found), what, f"ran; result: {result or '(none)'}")


def _graph_words(session: Any, found: dict[str, Any]) -> Outcome:
    """A graph approval's outcome in words: done once the run it let go on ended."""
    mark, approved = f"{found['verdict']}:{found['seq']}", found["verdict"] == "approve"
    end = next((e for e in session.events if e.seq > found["seq"] and e.kind in _ENDS), None)
    if end is None:
        request = session.context.get("approval.request")
        what = _short(request, 300) if request is not None else "the approval"
        after = "the run goes on…" if approved or not found["reason"] else (
            f"reason: {_short(found['reason'])}"
        )  # fmt: skip
        return Outcome("decided", mark, approved, _who(found), what, after)
    if end.error:
        after = f"the run failed: {_short(end.error, _RESULT)}"
    elif end.pending:
        after = "the run went on and now waits for another decision"
    else:
        after = f"the run finished: {_short(end.content or '(no answer)', _RESULT)}"
    if not approved and found["reason"]:
        after = f"reason: {_short(found['reason'])}; {after}"
    return Outcome("done", mark, approved, _who(found), "the approval", after)


def outcome_of(session: Any, iid: str) -> Outcome | None:
    """What became of interrupt ``iid`` of ``session`` (None: nothing decided it yet, a
    vote of a quorum at most), in words, from :func:`~intermission.outcomes.approval_outcomes`
    (the story every surface tells)."""
    outcomes = approval_outcomes(session)
    if iid.startswith("approval-") and not any(t.call_uuid == iid for t in session.hitl.tasks):
        try:
            asked = int(iid.rpartition("-")[2])
        except ValueError:
            return None
        # the first graph decision after the request (the interrupt's id is its seq)
        graph = next((o for o in outcomes if o["callId"] is None and o["seq"] > asked), None)
        return None if graph is None else _graph_words(session, graph)
    # the last decision of the call (a forgotten effect's call is decided again)
    call = [o for o in outcomes if o["callId"] == iid]
    return _call_words(session, call[-1]) if call else None


def message(outcome: Outcome, session_id: str) -> dict[str, Any]:
    """The message that replaces the one clicked: the outcome, no buttons."""
    icon = ":white_check_mark:" if outcome.approved else ":x:"
    return {
        "text": _escape(outcome.line),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn",
                                         "text": f"{icon} {_escape(outcome.line)}"[:3000]}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": (
                f"session `{_escape(visible(session_id))}` · decided via intermission")[:3000]}]},
        ],
    }  # fmt: skip


def reply_hook(
    target: str, response_url: str, session_id: str, iid: str
) -> Callable[[Any], list[Written]]:
    """``outbox_extra`` for the session a Slack click decides: each save writes the
    update of the clicked message for the outcome it sees, once per outcome."""

    def rows(session: Any) -> list[Written]:
        found = outcome_of(session, iid)
        if found is None or found.phase != "done":  # (see the module docstring)
            return []
        mark = f"slack:{target}:{session_id}:{iid}:{found.mark}:{found.phase}"
        key = "ntf_" + hashlib.sha256(mark.encode()).hexdigest()[:32]
        payload = {
            "kind": "decided", "session_id": session_id, "agent": session.agent,
            "created_ms": session.clock.now_ms(), "reason": None, "tasks": [],
            "approval": None, "items": [{"id": iid, "type": "tool_call", "tool": None}],
            "given": None, "roles": [],
            "detail": {"verdict": "approve" if found.approved else "reject",
                       "reviewer": found.who, "outcome": found.line},
            "reply": {"target": target, "url": response_url,
                      "message": message(found, session_id)},
        }  # fmt: skip
        return [Written(key, session_id, "decided", canonical_dumps(payload), once=mark)]

    return rows
