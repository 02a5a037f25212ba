"""The update of a Slack message a person clicked: what became of the approval (who
decided, approved, rejected or expired, what ran and its result or error), buttons gone —
whichever surface or path made that outcome final.

A click leaves a *reply handle* in the commit that records its vote (:func:`hold`): an
outbox row kept unsent until the click's ``response_url`` expires (Slack's: 30 minutes),
which alone holds the URL, and a URL-free mark in ``session.meta["replies"]``. Every
later save of the thread — a decision in the console, the CLI, AG-UI or a widget and its
run's end, a resume after this server died, the deadline sweeper's expiry — sees the mark,
and the save that makes the outcome final writes the update's row in its own transaction
(:func:`~intermission.stores.outbox_rules.derive`, from
:func:`~intermission.outcomes.final_outcome`; the store knows nothing of Slack). One row per
outcome: its key and ``once`` mark are made from the thread, the interrupt and the outcome,
so a later save of the same outcome writes nothing, and a retried delivery sends the same
bytes with the same key. The dispatcher reads the URL from the handle when it sends, and
the message's words are made then (:func:`message_of`).

Final: a rejection or an expiry when recorded, an approval once the call ran (a graph
approval: once the run it let go on ended). An interim "approved, running" update is not
sent: delivered after a retry it could overwrite the final one (Slack has no conditional
update). Left: an outcome made final after the handle expired (30 minutes after the click)
is not shown there (a log line says so, without the URL): the message keeps its buttons,
and a later click on it is answered that the approval no longer waits, naming its
decision."""

from __future__ import annotations

import json
from typing import Any

from .._json import canonical_dumps
from .._text import visible
from ..notify.interrupts import summarize
from ..notify.redact import redact_text
from ..outcomes import deciders_of
from ..principals import label
from ..stores.outbox import Written, new_key
from ..stores.outbox_rules import REPLIES

__all__ = ["REPLY_VALID_MS", "Outcome", "hold", "message_of", "words_of"]

REPLY_VALID_MS = 30 * 60 * 1000
"""How long a click's ``response_url`` takes updates (Slack: 30 minutes, 5 uses)."""

_RESULT = 1500
"""How much of a result or an error the message shows (characters)."""


class Outcome:
    """What became of one interrupt: ``phase`` (``done``), ``mark`` (the outcome it is
    about) and the words."""

    def __init__(self, phase: str, mark: str, approved: bool, who: str, what: str,
                 after: str, *, expired: bool = False) -> None:  # fmt: skip
        self.phase, self.mark, self.approved, self.expired = phase, mark, approved, expired
        self.who, self.what, self.after = who, what, after

    @property
    def line(self) -> str:
        """One line: ``Approved by alice and bob: delete_user(…) — ran; result: …``."""
        if self.expired:
            return visible(f"Expired: {self.what} — {self.after}")
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
    names = [label(d.get("name"), d.get("display")) for d in deciders_of(found)]
    return " and ".join(n for n in names if n) or "an unnamed reviewer"


def _what(found: dict[str, Any]) -> str:
    if found.get("callId") is not None:
        return _call(found.get("tool") or "the call", found.get("editedArgs") or found.get("args"))
    request = found.get("request")
    return _short(request, 300) if request is not None else "the approval"


def _after(found: dict[str, Any]) -> str:
    """What followed the decision, in words."""
    if found.get("expired"):
        voted = [d for d in found.get("deciders") or () if d.get("verdict") == "approve"]
        so_far = (f" (approved so far by {_who({'deciders': voted})})" if voted else "")
        return f"the deadline passed{so_far}; it did not run"
    reason = f"reason: {_short(found['reason'])}" if found.get("reason") else ""
    end = found.get("end")
    if found.get("callId") is None and isinstance(end, dict):
        if end.get("error"):
            after = f"the run failed: {_short(end['error'], _RESULT)}"
        elif end.get("pending"):
            after = "the run went on and now waits for another decision"
        else:
            after = f"the run finished: {_short(end.get('content') or '(no answer)', _RESULT)}"
        return f"{reason}; {after}" if reason else after
    if found.get("verdict") != "approve":
        return reason or "it did not run"
    ran = found.get("ran") or {}
    if ran.get("error"):
        return f"failed: {_short(ran['error'], _RESULT)}"
    return f"ran; result: {_short(ran.get('result') or '', _RESULT) or '(none)'}"


def words_of(found: dict[str, Any]) -> Outcome:
    """A final outcome (:func:`~intermission.outcomes.final_outcome`) in words."""
    approved = found.get("verdict") == "approve"
    if found.get("expired"):
        return Outcome("done", str(found.get("mark")), False, "", _what(found), _after(found),
                       expired=True)  # fmt: skip
    return Outcome("done", str(found.get("mark")), approved, _who(found), _what(found),
                   _after(found))  # fmt: skip


def message(outcome: Outcome, session_id: str) -> dict[str, Any]:
    """The message that replaces the one clicked: the outcome, no buttons."""
    icon = ":hourglass:" if outcome.expired else (
        ":white_check_mark:" if outcome.approved else ":x:")  # fmt: skip
    return {
        "text": _escape(outcome.line),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn",
                                         "text": f"{icon} {_escape(outcome.line)}"[:3000]}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": (
                f"session `{_escape(visible(session_id))}` · decided via intermission")[:3000]}]},
        ],
    }  # fmt: skip


def message_of(found: dict[str, Any], session_id: str) -> dict[str, Any]:
    """The update for a final outcome (what a reply row holds), made when it is sent."""
    return message(words_of(found), session_id)


def hold(session: Any, target: str, response_url: str, iid: str) -> None:
    """Leave a reply handle for interrupt ``iid`` on ``session`` (see the module
    docstring): the mark in its meta and, in the same save, the outbox row that holds
    ``response_url``. Handles of this session that expired are dropped."""
    now = session.clock.now_ms()
    handles = {k: v for k, v in (session.meta.get(REPLIES) or {}).items()
               if isinstance(v, dict) and float(v.get("until_ms") or 0) >= now}  # fmt: skip
    key = new_key()
    until = now + REPLY_VALID_MS
    # ("after": this click's place in the log; the outcome the message shows is the first
    # of interrupt ``iid`` from here on, never a later call a model gave the same id)
    handles[iid] = {"session": session.session_id, "target": target, "handle": key,
                    "until_ms": until, "after": session.events.next_seq}  # fmt: skip
    session.meta[REPLIES] = handles
    payload = canonical_dumps({"kind": "decided", "session_id": session.session_id,
                               "reply": {"target": target, "url": response_url}})  # fmt: skip
    row = Written(key, session.session_id, "decided", payload, once=f"held:{key}",
                  held_until=until)  # fmt: skip
    session.outbox_extra = lambda s: [row] if s.session_id == row.session_id else []
