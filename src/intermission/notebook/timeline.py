"""Timeline: every event of a session across its requests, as escaped HTML (R34)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..hitl.expiry import THE_DEADLINE, by_deadline
from ._html import CELL, CSS, TABLE, badge, esc, id_html, pre_json
from ._live import LiveDisplay

__all__ = ["Timeline", "ledger_state", "render_timeline"]

_BADGE = {
    "run_start": ("run start", "im-run"), "run_end": ("run end", "im-run"),
    "reason_start": ("reason", "im-reason"), "reason_delta": ("delta", "im-reason"),
    "reason_end": ("reason end", "im-reason"), "action_start": ("action", "im-action"),
    "action_end": ("action end", "im-action"), "tool_call_start": ("tool", "im-tool"),
    "tool_call_end": ("tool end", "im-tool"), "hitl_pending": ("awaiting human", "im-hitl"),
    "hitl_decided": ("decided", "im-hitl"), "hitl_expired": ("expired", "im-bad"),
    "approval_decided": ("decided", "im-hitl"), "approval_voted": ("voted", "im-hitl"),
    "approval_warned": ("deadline near", "im-reason"),
    "approval_escalated": ("escalated", "im-bad"), "approval_expired": ("expired", "im-bad"),
    "node_start": ("node", "im-node"), "node_end": ("node end", "im-node"),
    "team_start": ("team start", "im-team"), "team_end": ("team end", "im-team"),
}  # fmt: skip


def _ms(value: float) -> str:
    return f"{value:.1f} ms" if value < 1000 else f"{value / 1000:.2f} s"


class _Voted:
    """A vote as :func:`_decision` shows a decision."""

    def __init__(self, verdict: str, reviewer: str, comment: str | None) -> None:
        self.verdict, self.reviewer, self.comment = verdict, reviewer, comment


def _clock(ms: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%H:%M:%S UTC")


def _decision(d: Any) -> str:
    if by_deadline(d.reviewer, getattr(d, "timed_out", False)):
        who = f" by {THE_DEADLINE}"  # an expiry (as every view names it)
    else:
        who = f" by {esc(d.reviewer)}" if d.reviewer else " (no reviewer named)"
    note = f" — {esc(d.comment)}" if d.comment else ""
    return f"<b>{esc(d.verdict)}</b>{who}{note}"


def _detail(e: Any) -> str:
    k = e.kind
    if k in ("run_start", "team_start"):
        return "new prompt: " + esc(e.prompt) if e.prompt else "resume (empty prompt)"
    if k in ("run_end", "team_end"):
        flags = " · pending" * e.pending + " · abnormal" * e.is_abnormal
        return esc(e.content) + f"<i>{flags}</i>"
    if k == "reason_start":
        return f"turn {e.turn}"
    if k == "reason_delta":
        return esc(e.text)
    if k == "reason_end":
        calls = ", ".join(f"{esc(c.name)} {id_html(c.id)}" for c in e.tool_calls)
        text = esc(e.content) or (f"calls {calls}" if calls else "")
        return f"{text} <span class='im-t'>{_ms(e.duration_ms)}</span>"
    if k == "action_start":
        return f"{len(e.tool_calls)} call(s)"
    if k == "tool_call_start":
        head = f"{esc(e.tool_name)} {id_html(e.call_uuid)}"
        return f"<details><summary>{head}</summary>{pre_json(e.args)}</details>"
    if k == "tool_call_end":
        err = " " + badge(e.error, "im-bad") if e.error else ""
        skipped = (e.error or "") == "dry_run"
        css = "im-skipped" if skipped else ""
        return (
            f"<details class='{css}'><summary>{esc(e.tool_name)} {id_html(e.call_uuid)} → "
            f"{esc((e.observation or '')[:80])}{err} "
            f"<span class='im-t'>{_ms(e.duration_ms)}</span></summary>"
            f"{pre_json({'args': e.args, 'observation': e.observation})}</details>"
        )
    if k == "hitl_pending":
        items = "".join(
            f"<li>{esc(t.tool_name)} {id_html(t.call_uuid)}: {esc(t.reason)}{pre_json(t.args)}</li>"
            for t in e.tasks
        )
        return f"<span class='im-reason-text'>{esc(e.reason)}</span><ul>{items}</ul>"
    if k == "hitl_decided":
        d = e.decision
        edited = f" edited {pre_json(d.modified_args)}" if d.modified_args else ""
        return f"{_decision(d)} · {esc(e.tool_name)} {id_html(e.call_uuid)}{edited}"
    if k == "approval_decided":
        why = f" · reason: {esc(e.reason)}" if e.reason else ""
        return f"{_decision(e)}{why}"
    if k == "hitl_expired":
        return f"{esc(e.tool_name)} {id_html(e.call_uuid)} → {esc(e.resolution)}"
    if k == "approval_voted":
        v = e.vote
        what = f"{esc(e.tool_name)} {id_html(e.target)} · " if e.tool_name else ""
        return f"{what}{_decision(_Voted(v.verdict, v.name, v.comment))} · {esc(e.progress)}"
    if k in ("approval_warned", "approval_escalated", "approval_expired"):
        what = f"{esc(e.tool_name)} {id_html(e.target)}" if e.tool_name else "the approval"
        roles = f" · roles {esc(', '.join(e.roles))}" if getattr(e, "roles", None) else ""
        if k == "approval_expired":
            return f"{what} → {esc(e.resolution)} (timed out)"
        return f"{what} · deadline {esc(_clock(e.deadline_ms))}{roles}"
    if k == "node_start":
        return f"{esc(e.node_id)} <span class='im-t'>({esc(e.node_kind)})</span>"
    if k == "node_end":
        return f"{esc(e.node_id)} <span class='im-t'>{_ms(e.duration_ms)}</span>"
    return ""


_HEAD = f"{CELL};padding-top:6px;font-weight:bold;border-top:1px solid #9e9e9e"
"""A request's header row: a rule above it, in a grey both themes show."""


def render_timeline(
    events: Sequence[Any],
    ledger: dict[str, Any] | None = None,
    max_events: int = 500,
    session_id: str | None = None,
) -> str:
    """HTML for ``events``: one table for the whole session, a header row per request, so
    every request's columns line up. Times are relative to the first event, so a FakeClock
    gives byte-identical output. Only the last ``max_events`` rows are drawn. With
    ``session_id``, ledger effects another session of the family ran say where they ran."""
    shown = list(events)[-max_events:] if max_events else list(events)
    parts = [CSS, "<div class='im-timeline'>"]
    if len(shown) < len(events):
        parts.append(f"<p><i>showing the last {len(shown)} of {len(events)} events</i></p>")
    parts.append(  # (col widths as attributes too: kept where the <style> is not)
        f"<table style='{TABLE}'><colgroup><col class='im-c-t' width='80'>"
        "<col class='im-c-a' width='110'><col class='im-c-k' width='105'><col></colgroup><tbody>"
    )
    t0 = events[0].ts if events else 0.0
    request = 0
    teams_open = 0  # a member's RunStart belongs to the team request around it
    for i, e in enumerate(shown):
        if e.kind == "reason_delta" and not e.final:
            continue  # streamed chunks: their text is in the ReasonEnd row
        starts = e.kind in ("team_start", "run_start") and teams_open == 0
        if e.kind == "team_start":
            teams_open += 1
        elif e.kind == "team_end":
            teams_open = max(0, teams_open - 1)
        if starts or i == 0 or e.kind == "approval_decided":
            request += 1
            if e.kind == "approval_decided":
                label = "decision"
            elif e.kind in ("run_start", "team_start"):
                label = "new prompt" if getattr(e, "prompt", None) else "resume"
            else:
                label = "continued"
            parts.append(
                f"<tr><th colspan='4' class='im-req-row' style='{_HEAD}'><span "
                f"class='im-req-head'>Request {request}</span> · {esc(e.agent)} · {label}</th></tr>"
            )
        name, css = _BADGE.get(e.kind, (e.kind, "im-run"))
        if e.kind == "run_end" and e.is_abnormal:
            css = "im-bad"
        parts.append(
            f"<tr><td class='im-t' style='{CELL}'>+{_ms(e.ts - t0)}</td>"
            f"<td style='{CELL}'>{esc(e.agent)}</td><td style='{CELL}'>{badge(name, css)}</td>"
            f"<td style='{CELL}'>{_detail(e)}</td></tr>"
        )
    if ledger:
        parts.append(
            f"<tr><th colspan='4' class='im-req-row' style='{_HEAD}'>Side effects (ledger)"
            "</th></tr>"
        )
        for key, entry in sorted(ledger.items()):
            value = entry.result if entry.status == "completed" else entry.error
            parts.append(
                f"<tr><td colspan='2' style='{CELL}'>{esc(effect_label(key))}</td>"
                f"<td style='{CELL}'>{esc(ledger_state(entry, session_id))}</td>"
                f"<td style='{CELL}'>{esc(value)}</td></tr>"
            )
    parts.append("</tbody></table></div>")
    return "".join(parts)


_GENERATION = re.compile(r"effect-gen-[0-9a-f]{16}\.")


def effect_label(key: str) -> str:
    """A ledger key as a person reads it: the session generation in a minted effect id
    (random, the same for every effect of the session) is left out, so a view of the same
    run reads the same every time (R34); the proposal's agent and number stay."""
    return _GENERATION.sub("effect-", key)


def ledger_state(entry: Any, session_id: str | None = None) -> str:
    """An effect's state in words: where it ran when another session of the family ran it,
    and a dry-run fork's skipped effects as such."""
    if entry.status == "skipped":
        return "skipped (dry run): not run"
    state = "unknown (started, never completed)" if entry.status == "started" else entry.status
    if session_id is not None and entry.by:
        state += " · ran here" if entry.by == session_id else f" · ran in {entry.by}"
    return state


class Timeline(LiveDisplay):
    """The event timeline of a session (all requests): HTML, text and JSON lines."""

    def __init__(self, session: Any, *, max_events: int = 500) -> None:
        self.session = session
        self.max_events = max_events

    def html(self) -> str:
        """The timeline as HTML."""
        s = self.session
        return render_timeline(list(s.events), dict(s.ledger), self.max_events, s.session_id)

    def to_jsonl(self) -> str:
        """Every event as JSON lines."""
        text: str = self.session.events.to_jsonl()
        return text

    def _repr_mimebundle_(
        self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None
    ) -> dict[str, str]:
        return {"text/html": self.html(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        kinds = self.session.events.kinds()
        return f"<Timeline {self.session.session_id!r}: {len(kinds)} events>"
