"""The AG-UI events of a session's log: what a reconnecting client gets (``Last-Event-ID``)
and what a replayed resume answers with.

The log holds intermission's events; the AG-UI events are made from them again by the same
:class:`~intermission.agui.events.Translator` the live stream used, so ids and order match.
What the log does not hold — the client's run ids and message ids, and the snapshots a pause
sent — the server notes in the session (``traces["agui:server"]``, bounded), so a replay sends
what the live stream sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ag_ui import core as ag
from pydantic import TypeAdapter

from .events import ENDS, STARTS, Translator, agui_messages, state_of
from .sse import Cursor

__all__ = [
    "ADAPTER",
    "finished",
    "message_ids",
    "notes_of",
    "paused",
    "remember",
    "replay",
    "run_named",
    "runs_of",
    "seen_message_ids",
]

ADAPTER = "agui:server"
"""Where the server keeps its own notes in a session's agent states (``traces``): which
AG-UI run id each run had, the events that closed each pause, the message ids the client saw,
and the runs another run continued within one AG-UI run (``chained``)."""
KEEP = 100
KEEP_IDS = 1000

EVENT: TypeAdapter[Any] = TypeAdapter(ag.Event)


def notes_of(session: Any) -> dict[str, Any]:
    """The server's notes in a session (empty ones when it has none yet)."""
    notes = session.traces.get(ADAPTER)
    if not isinstance(notes, dict):
        notes = {"kind": "agui", "runs": {}, "pauses": {}, "ids": {}}
    return notes


def remember(session: Any, run_ids: list[str], agui_run: str, end_seq: int | None,
              closing: list[Any], ids: dict[int, str],
              user_id: str | None = None) -> None:  # fmt: skip
    """Note the AG-UI id of the run's outer runs (several: each but the last is continued
    by the next) and, for a pause, the events that closed it (snapshots and outcome as
    they were then), so a replay sends what the live stream sent; and ``user_id``, the
    id of the user message the run took (kept apart from positions, which a full message
    window moves: see :func:`seen_message_ids`)."""
    notes = notes_of(session)
    users = [u for u in notes.get("users") or [] if u != user_id]
    users += [user_id] if user_id else []
    runs = dict(notes.get("runs") or {})
    for run_id in run_ids:
        runs[run_id] = agui_run
    chained = [*(notes.get("chained") or []), *run_ids[:-1]]
    known = dict(notes.get("ids") or {})
    known.update({str(k): v for k, v in ids.items()})
    kept = dict(notes.get("pauses") or {})
    if end_seq is not None and closing:
        kept[str(end_seq)] = [
            e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in closing
        ]
    notes = {
        "kind": "agui",
        "runs": dict(list(runs.items())[-KEEP:]),
        "pauses": dict(list(kept.items())[-KEEP:]),
        "ids": dict(list(known.items())[-KEEP_IDS:]),
    }
    if chained:
        notes["chained"] = chained[-KEEP:]
    if users:
        notes["users"] = users[-KEEP_IDS:]
    session.traces[ADAPTER] = notes


def message_ids(
    session: Any, before: list[Any], user_id: str | None, tr: Translator
) -> dict[int, str]:
    """The ids the client saw for the session's messages: those noted by earlier runs, and
    for this run's the user's own and the streamed texts'. ``before``: the session's
    messages when the run began (a full window drops the oldest as the run adds some, so
    the noted positions move back by as many)."""
    gone = _dropped(before, session.messages)
    ids = {
        int(k) - gone: v for k, v in (notes_of(session).get("ids") or {}).items() if int(k) >= gone
    }
    first = len(before) - gone
    texts = iter(tr.texts)
    for i, m in enumerate(session.messages[first:], start=first):
        if m.role == "user" and user_id:
            ids[i] = user_id
        elif m.role == "assistant" and m.content:
            found = next(texts, None)
            if found:
                ids[i] = found
    return ids


def _dropped(before: list[Any], now: list[Any]) -> int:
    """How many of the messages ``before`` the window dropped to give ``now``."""
    if not now:
        return len(before)
    head = now[0]
    return next((i for i, m in enumerate(before) if m is head), len(before))


def seen_message_ids(session: Any) -> set[str]:
    """The ids the client was shown for the session's user messages (its own ids, else the
    ones MESSAGES_SNAPSHOT made up), and the ids of the user messages runs took: a user
    message with one of them is not a new one."""
    notes = notes_of(session)
    ids = {int(k): v for k, v in (notes.get("ids") or {}).items()}
    tid = session.session_id
    shown = {
        ids.get(i) or f"{tid}:m{i}" for i, m in enumerate(session.messages) if m.role == "user"
    }
    return shown | set(notes.get("users") or ())


def run_named(session: Any, agui_run: str) -> list[Any] | None:
    """The events of the outer run the client named ``agui_run``, if the log holds one."""
    noted = notes_of(session).get("runs") or {}
    mine = {k for k, v in noted.items() if v == agui_run}
    return next((events for events in runs_of(session) if events[0].run_id in mine), None)


def runs_of(session: Any) -> list[list[Any]]:
    """The session's log cut into AG-UI runs: its outer runs (a team's inner agents stay
    inside theirs), a run noted as continued by the next one joined with it."""
    chained = set(notes_of(session).get("chained") or ())
    out: list[list[Any]] = []
    outer: str | None = None
    joined = False
    for event in session.events:
        if outer is None:
            if event.kind in STARTS:
                outer = event.run_id
                if not joined:
                    out.append([])
                out[-1].append(event)
            continue
        out[-1].append(event)
        if event.kind in ENDS and event.run_id == outer:
            joined = outer in chained
            outer = None
    return out


def replay(session: Any, after: Cursor | None, run_id: str | None = None,
           only: list[Any] | None = None) -> Iterator[tuple[Cursor, Any]]:  # fmt: skip
    """AG-UI events of the session's log (or of one run), with cursors after ``after``."""
    for events in [only] if only is not None else runs_of(session):
        for cursor, out in _replay_run(session, events, run_id):
            if after is None or cursor > after:
                yield cursor, out


def _replay_run(
    session: Any, events: list[Any], run_id: str | None
) -> Iterator[tuple[Cursor, Any]]:
    notes = notes_of(session)
    stored = notes.get("pauses") or {}
    tid = session.session_id
    rid = run_id or (notes.get("runs") or {}).get(events[0].run_id) or events[0].run_id

    def finish(end: Any) -> list[Any]:
        if not end.pending:
            return [finished(tid, rid, end)]
        raw = stored.get(str(end.seq))
        if raw:
            closing = [EVENT.validate_python(e) for e in raw]
            for e in closing:
                if e.type == ag.EventType.RUN_FINISHED:
                    e.run_id = rid
            return closing
        found = [
            ag.Interrupt(id=t.call_uuid, reason="tool_call", tool_call_id=t.call_uuid)
            for e in events if e.kind == "hitl_pending" for t in e.tasks
        ] or [ag.Interrupt(id=f"approval-{end.seq}", reason="confirmation")]  # fmt: skip
        return paused(session, tid, rid, found, tr)

    chained = set(notes.get("chained") or ())
    tr = Translator(tid, rid, finish, lambda end: end.run_id in chained)
    for event in events:
        for k, out in enumerate(tr.feed(event)):
            yield (event.seq, k), out


def finished(tid: str, rid: str, end: Any) -> Any:
    """The ``RUN_FINISHED`` of a run that did not pause; a ``RUN_ERROR`` when its model
    failed for good (not a success: the request is kept, and a run without a new message
    asks the model again)."""
    if getattr(end, "error", None):
        code = str(end.error).partition(":")[0]
        return ag.RunErrorEvent(
            code=code if code.isidentifier() else "ModelError",
            message=f"{end.error}; the request is kept: a run without a new message asks "
            "the model again",
        )
    return ag.RunFinishedEvent(
        thread_id=tid,
        run_id=rid,
        result=end.content or None,
        outcome=ag.RunFinishedSuccessOutcome(type="success"),
    )


def paused(session: Any, tid: str, rid: str, interrupts: list[ag.Interrupt],
            tr: Translator, ids: dict[int, str] | None = None) -> list[Any]:  # fmt: skip
    """The events that close a paused run: ``STATE_SNAPSHOT``, ``MESSAGES_SNAPSHOT`` (with
    the tool calls that wait), then ``RUN_FINISHED`` with every open interrupt."""
    waiting = [(m, calls) for m, calls in tr.calls if any(c.id in {i.tool_call_id for i in
               interrupts} for c in calls)]  # fmt: skip
    return [
        ag.StateSnapshotEvent(snapshot=state_of(session)),
        ag.MessagesSnapshotEvent(messages=agui_messages(tid, session.messages, waiting, ids)),
        ag.RunFinishedEvent(
            thread_id=tid,
            run_id=rid,
            outcome=ag.RunFinishedInterruptOutcome(type="interrupt", interrupts=interrupts),
        ),
    ]
