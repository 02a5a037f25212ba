"""A notification as targets see it: an outbox row with its deep links, its JSON body (the
webhook's contract) and the words a person reads (Slack, email)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .._check import shown
from .._json import canonical_dumps
from .._text import visible
from ..errors import NotifyConfigError
from ..stores.outbox import OutboxRow, Written
from .interrupts import interrupts_of
from .redact import redact, redact_text

__all__ = [
    "BODY_VERSION", "FIXED", "Notification", "check_public_url", "fixed", "link", "with_body",
]  # fmt: skip

BODY_VERSION = 1
"""The version of the webhook body's shape (a field added keeps it; a change bumps it)."""

FIXED = '{"body":'
"""How a stored payload whose body is fixed begins (the store compares it in SQL)."""


def check_public_url(url: Any) -> str | None:
    """A public base URL for deep links (``https://review.example.com``), or None."""
    if url is None:
        return None
    if not isinstance(url, str) or not url.startswith(("https://", "http://")) or " " in url:
        raise NotifyConfigError(f"public_url is an http(s) URL, not {shown(url)}")
    return url.rstrip("/")


def link(public_url: str | None, session_id: str, interrupt_id: str | None = None) -> str | None:
    """The console's page for one interrupt of a thread (or for the thread): the console
    reads the fragment, which never reaches a server log."""
    if public_url is None:
        return None
    page = f"{public_url}/#thread={quote(session_id, safe='')}"
    return page + (f"&interrupt={quote(interrupt_id, safe='')}" if interrupt_id else "")


def _iso(ms: float | None) -> str | None:
    if ms is None:
        return None
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_HEADLINES = {
    "pending": "Approval needed",
    "warning": "Deadline near",
    "escalated": "Escalated to you",
    "expired": "Expired",
    "decided": "Decided",
    "unknown_outcome": "Needs a person: an effect of unknown outcome",
}


@dataclass(frozen=True)
class Notification:
    """One notification, ready for a target."""

    key: str
    """The idempotency key: the same on every delivery attempt of this notification."""
    kind: str
    session_id: str
    agent: str | None
    created_ms: float
    reason: str | None
    deadline_ms: float | None
    interrupts: tuple[Mapping[str, Any], ...]
    """Each: ``id``, ``type`` (``tool_call`` or ``confirmation``), ``tool``, ``arguments``
    (a bounded summary), ``whole`` (the summary is the whole arguments: nothing cut,
    redacted or left out), ``reason``, ``deadline_ms``, ``policy``, ``link``."""
    roles: tuple[str, ...]
    """Roles that may decide (empty: the policy names none)."""
    detail: Mapping[str, Any]
    link: str | None
    """The console's page for the first interrupt (or the thread); None without a public
    URL."""
    attempt: int = 1
    fixed_body: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """The body as written with the outbox row (what :meth:`body` returns then)."""
    reply: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """An update of a message a person acted on (a Slack click's outcome): ``target``
    (the one target that sends it), ``url`` (where: a credential, never in the body nor a
    log; read from the outbox's reply ``handle`` when it is sent) and ``message`` (or the
    ``outcome`` it is made of when sent). Kept beside the body, never in it."""

    @classmethod
    def of(cls, row: OutboxRow, public_url: str | None) -> Notification:
        """The notification of an outbox row: its body as fixed when the row was written
        (or first taken), else made now with links under ``public_url``."""
        p = row.payload
        if p.get("kind") != row.kind or p.get("session_id") != row.session_id:
            raise ValueError("the notification's payload does not match its row")
        body = p.get("body")
        if body is not None:
            return cls._of_body(row, body)
        sid = row.session_id
        found, roles = interrupts_of(p)
        interrupts = tuple({**i, "link": link(public_url, sid, i.get("id"))} for i in found)
        deadlines = [i["deadline_ms"] for i in interrupts if i.get("deadline_ms") is not None]
        first = interrupts[0]["id"] if interrupts else None
        reason = p.get("reason")
        return cls(
            key=row.key, kind=row.kind, session_id=sid, agent=p.get("agent"),
            created_ms=float(p.get("created_ms") or row.created_ms),
            reason=redact_text(reason) if isinstance(reason, str) else None,
            deadline_ms=min(deadlines) if deadlines else None, interrupts=interrupts,
            roles=tuple(roles), detail=redact(dict(p.get("detail") or {})),
            link=link(public_url, sid, first), attempt=row.attempts + 1,
            reply=_reply(p),
        )  # fmt: skip

    @classmethod
    def _of_body(cls, row: OutboxRow, body: Any) -> Notification:
        """The notification whose body was fixed with its row (every dispatcher sends
        these bytes)."""
        if not isinstance(body, dict) or body.get("key") != row.key or body.get("kind") != row.kind:
            raise ValueError("the notification's body does not match its row")
        session = body.get("session") or {}
        if session.get("id") != row.session_id:
            raise ValueError("the notification's body does not match its row")
        interrupts = tuple(dict(i) for i in body.get("interrupts") or () if isinstance(i, dict))
        return cls(
            key=row.key, kind=row.kind, session_id=row.session_id, agent=session.get("agent"),
            created_ms=_ms(body.get("created_at")) or row.created_ms, reason=body.get("reason"),
            deadline_ms=_ms(body.get("deadline_at")), interrupts=interrupts,
            roles=tuple(map(str, body.get("roles") or ())), detail=dict(body.get("detail") or {}),
            link=body.get("link"), attempt=row.attempts + 1, fixed_body=body,
            reply=_reply(row.payload),
        )  # fmt: skip

    def body(self) -> dict[str, Any]:
        """The JSON a webhook receives (the same on every attempt, by every dispatcher:
        fixed when the notification was written)."""
        if self.fixed_body is not None:
            return dict(self.fixed_body)
        return {
            "type": "intermission.notification",
            "version": BODY_VERSION,
            "key": self.key,
            "kind": self.kind,
            "created_at": _iso(self.created_ms),
            "session": {"id": self.session_id, "agent": self.agent},
            "reason": self.reason,
            "deadline_at": _iso(self.deadline_ms),
            "interrupts": [
                {**i, "deadline_at": _iso(i.get("deadline_ms"))} for i in self.interrupts
            ],
            "roles": list(self.roles),
            "detail": dict(self.detail),
            "link": self.link,
        }

    # -- words for people (every piece of text shown with its control characters escaped)
    @property
    def headline(self) -> str:
        """A few words for the kind: ``Approval needed``, ``Decided`` and so on."""
        return _HEADLINES.get(self.kind, self.kind)

    def subject(self) -> str:
        """One line: what happened, to what, in which session."""
        what = self.what(0) if self.interrupts else ""
        if self.kind == "decided":
            verdict, who = self.detail.get("verdict"), self.detail.get("reviewer")
            what = f"{verdict} by {who or 'an unnamed reviewer'}" + (f": {what}" if what else "")
        if self.kind == "unknown_outcome":
            what = f"effect {self.detail.get('effect')}"
        more = f" (+{len(self.interrupts) - 1} more)" if len(self.interrupts) > 1 else ""
        line = f"{self.headline}: {what}{more} in session {self.session_id}"
        return visible(line)[:300]

    def what(self, index: int) -> str:
        """An interrupt in a few words: ``delete_user(user_id=1001)``, or the request of
        a graph approval."""
        item = self.interrupts[index]
        args = item.get("arguments") or {}
        if item.get("tool"):
            shown_args = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
            return visible(f"{item['tool']}({shown_args})")[:300]
        request = args.get("request") if isinstance(args, dict) else None
        return visible(_short(request) if request is not None else "approval")[:300]

    def lines(self) -> list[str]:
        """The plain-text body: one line per fact, then the links."""
        out = [self.subject(), ""]
        if self.agent:
            out.append(f"Agent: {visible(self.agent)}")
        if self.reason:
            out.append(f"Reason: {visible(self.reason)}")
        for i, item in enumerate(self.interrupts):
            out.append(f"- {self.what(i)}")
            if item.get("reason") and item.get("reason") != self.reason:
                out.append(f"  why: {visible(item['reason'])}")
            if item.get("deadline_ms") is not None:
                out.append(f"  decide by: {_iso(item['deadline_ms'])}")
            needed = _needed(item.get("policy"))
            if needed:
                out.append(f"  still needed: {visible(needed)}")
            if item.get("link"):
                out.append(f"  open: {item['link']}")
        for name in ("verdict", "reviewer", "comment", "resolution", "effect", "actor"):
            value = self.detail.get(name)
            if value is not None:
                out.append(f"{name.capitalize()}: {visible(value)}")
        if self.link and not self.interrupts:
            out.append(f"Open: {self.link}")
        out += ["", f"Notification {self.key} (the same on every delivery of it)"]
        return out


def _reply(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    reply = payload.get("reply")
    return reply if isinstance(reply, Mapping) else None


def _ms(iso: Any) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def fixed(row: OutboxRow, public_url: str | None) -> str:
    """The payload of ``row`` with its body fixed (links under ``public_url``): a text to
    store. A payload whose body is fixed already is returned as it is."""
    rest = {k: v for k, v in row.payload.items() if k != "body"}
    body = row.payload.get("body")
    if body is None:
        body = Notification.of(row, public_url).body()
    # the body first: a stored payload that starts so has its body fixed (see FIXED)
    tail = canonical_dumps(rest)[1:]
    return FIXED + canonical_dumps(body) + ("," + tail if rest else tail)


def with_body(written: Written, now_ms: float, public_url: str | None) -> Written:
    """A notification a save writes, its body fixed now (links under ``public_url``), so
    that every dispatcher sends the same bytes for its key. A payload no body can be made
    of is written as it is (a dispatcher fixes it when it first takes it, or marks it
    dead), never failing the save. Without a public URL (no dispatcher recorded one yet)
    it is left to the first dispatcher that takes it, which fixes it with its own."""
    import json

    if public_url is None:
        return written
    try:
        payload = json.loads(written.payload)
        row = OutboxRow(
            key=written.key, session_id=written.session_id, kind=written.kind,
            status="pending", created_ms=now_ms, due_ms=now_ms, attempts=0, done=(),
            last_error=None, payload=payload,
        )  # fmt: skip
        return written._replace(payload=fixed(row, public_url))
    except Exception:  # (the save must not fail for a notification's words)
        return written


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _needed(policy: Any) -> str:
    """What an approval policy still needs, in words."""
    if not isinstance(policy, dict):
        return ""
    parts = []
    if policy.get("approvals_needed"):
        parts.append(f"{policy['approvals_needed']} approval(s)")
    if policy.get("roles"):
        parts.append("from " + " or ".join(map(str, policy["roles"])))
    if policy.get("reviewers"):
        parts.append("by " + ", ".join(map(str, policy["reviewers"])))
    return " ".join(parts)
