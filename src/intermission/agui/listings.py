"""What ``GET /interrupts``, ``GET /decided`` and ``GET /threads/{id}`` list: a store's open
interrupts a page at a time, and its recently decided approvals with their outcomes. Plain
functions of a store and the served agents, kept apart from the ASGI routing in
:mod:`intermission.agui.app`."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from starlette.requests import Request

from ..errors import SessionNotFoundError, SnapshotError, UsageError
from ..outcomes import approval_outcomes
from ..stores.base import PendingSession, SessionStore
from .interrupts import decided, open_interrupts
from .served import Served


def interrupts_of(session: Any, served: Served) -> list[dict[str, Any]]:
    """A session's open interrupts, each with its version (``ops@1``) and whether this
    server runs it (a version not served here: the console disables its buttons)."""
    found = open_interrupts(session, session.clock.now_ms())  # expired: not decidable
    version = served.describe(session) if found else {}
    return [
        {
            "threadId": session.session_id,
            "agent": session.agent,
            **version,
            "interrupt": i.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for i in found
    ]


PAGE = 200
"""``GET /interrupts`` lists the open interrupts of this many paused threads a page."""
MAX_PAGE = 1000


def cursor_of(since: float, session_id: str) -> str:
    """An opaque ``next`` cursor: the last listed entry's place in ``store.pending()``
    (when it became pending, which does not move while it stays open, and its id)."""
    raw = json.dumps([since, session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def page_of(request: Request) -> tuple[int, PendingSession | None]:
    """``?limit=&after=`` of ``GET /interrupts`` (UsageError when not ours)."""
    text = request.query_params.get("limit", str(PAGE))
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= MAX_PAGE):
        raise UsageError(f"limit is a whole number from 1 to {MAX_PAGE}")
    cursor = request.query_params.get("after")
    if cursor is None:
        return int(text), None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        since, sid, *_ = json.loads(raw)
        if not isinstance(sid, str) or not isinstance(since, (int, float)):
            raise ValueError
        if isinstance(since, bool) or not math.isfinite(since := float(since)):
            raise ValueError
        return int(text), PendingSession(sid, None, None, pending_since=since)
    except (ValueError, TypeError, OverflowError, RecursionError, binascii.Error):
        # (a hand-made cursor: too deep, an integer no float holds, NaN…)
        raise UsageError("after is the next cursor of an earlier page") from None


def listing(
    store: SessionStore, served: Served, limit: int, after: PendingSession | None
) -> dict[str, Any]:
    """One page of ``GET /interrupts``: the open interrupts of ``limit`` paused threads,
    the threads whose rows cannot be read (reported, never a 503 that hides the rest) and,
    on the first page, the threads stuck on an effect of unknown outcome."""
    page = store.pending(limit=limit + 1, before=after)
    found: dict[str, tuple[float, str, Any]] = {p.session_id: (p.pending_since, p.session_id, p)
                                                for p in page}  # fmt: skip
    for u in getattr(page, "unreadable", []):
        found[u.session_id] = (u.pending_since or 0.0, u.session_id, u.why)
    # in the store's own order (a store of another make lists its readable rows only)
    rows = [found[sid] for sid in getattr(page, "ids", [p.session_id for p in page])]
    out: list[dict[str, Any]] = []
    unreadable: list[dict[str, str]] = []
    for _, sid, item in rows[:limit]:
        if isinstance(item, str):
            unreadable.append({"threadId": sid, "why": item})
            continue
        try:
            out += interrupts_of(store.load(sid), served)
        except SessionNotFoundError:
            continue  # deleted meanwhile
        except SnapshotError as exc:  # damaged where the listing's checks do not look
            unreadable.append({"threadId": sid, "why": str(exc).splitlines()[0][:500]})
    more = len(rows) > limit
    data: dict[str, Any] = {
        "interrupts": out,
        "unreadable": unreadable,
        "next": cursor_of(rows[limit - 1][0], rows[limit - 1][1]) if more else None,
    }
    stuck = getattr(store, "stuck", None)
    if after is None and stuck is not None:
        data["stuck"] = [
            {"threadId": s.session_id, "agent": s.agent, "status": s.status, "key": s.key,
             "startedMs": s.started_ms, "why": s.why}
            for s in stuck()
        ]  # fmt: skip
    return data


def outcomes_of(session: Any) -> list[dict[str, Any]]:
    """The session's decided approvals with their outcome, each with its ``interruptId``
    (the tool call's id, or the graph approval's ``approval-<seq>``)."""
    ids = {d.seq: iid for iid, d in decided(session).items() if d.applied}
    out = []
    for o in approval_outcomes(session):
        iid = o["callId"] or ids.get(o["seq"])
        if iid is not None:
            out.append({"interruptId": iid, **o})
    return out


DECIDED = 20
"""``GET /decided`` lists this many recently decided approvals unless asked otherwise."""
MAX_DECIDED = 100


def decided_listing(store: SessionStore, served: Served, limit: int) -> dict[str, Any]:
    """``GET /decided``: the approvals decided last, newest first, each with its outcome
    (:func:`~intermission.outcomes.approval_outcomes`), read from the ``limit`` sessions
    saved last (a store that cannot list them lists none). A session that cannot be read
    is skipped here: ``GET /interrupts`` reports it."""
    recent = getattr(store, "recent", None)
    found: list[dict[str, Any]] = []
    for sid in recent(limit) if recent is not None else []:
        try:
            session = store.load(sid)
        except (SessionNotFoundError, SnapshotError):
            continue
        version = served.describe(session)
        found += [{"threadId": sid, "agent": session.agent, **version, **o}
                  for o in outcomes_of(session)]  # fmt: skip
    found.sort(key=lambda o: o["atMs"] or 0.0, reverse=True)
    return {"decided": found[:limit]}
