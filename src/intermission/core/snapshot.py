"""Session snapshots: versioned, validated JSON; never pickle (R28)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .. import _check, limits
from .._clock import SYSTEM_CLOCK
from .._json import canonical_dumps, check_json, loads, may_hold_surrogate, surrogate_key_path
from ..errors import (
    IntermissionError,
    NotSerializableError,
    SnapshotSchemaError,
    SnapshotTooLargeError,
)
from ..limits import MAX_DEPTH, MAX_EVENTS, MAX_MESSAGES
from .agent_state import state_data, state_from
from .context import FlowContext
from .events_log import EventLog
from .history import CORE_KEYS, History, check_patch, core_text, core_values
from .ledger import new_generation
from .session import check_effect_key, check_session_id
from .snapshot_model import (
    SCHEMA_VERSION,
    GraphRunModel,
    SessionSnapshot,
)
from .state import FlowTrace, GraphRun

if TYPE_CHECKING:
    from .session import InMemoryAgentSession

__all__ = [
    "SCHEMA_VERSION",
    "GraphRunModel",
    "SessionSnapshot",
    "canonical",
    "check_size",
    "parse_snapshot",
    "session_data",
]

_UNSET: Any = object()
_DEFAULTS: dict[str, Any] = {
    "status": "new", "agent": None, "agent_fingerprint": None, "agent_version": None,
    "release": None, "pending": False,
    "pending_reason": None, "context": {}, "requester": None, "traces": {},
    "hitl": {"agent": None, "tasks": [], "decisions": {}, "expired": []},
    "ledger": {}, "messages": [], "max_messages": 50, "events": [], "max_events": 1000,
    "next_seq": 1, "flow": {"root": None, "graphs": {}}, "history": None, "parent": None,
    "family": None, "generation": None, "effects": "real", "meta": {},
}  # fmt: skip


def session_data(session: InMemoryAgentSession) -> dict[str, Any]:
    """Everything in a session as JSON-ready data (no validation; see take_snapshot)."""
    ctx = session.context
    for key, value in ctx.data.items():
        check_json(key, value)
    for key, entry in session.ledger.items():
        check_json(f"ledger[{key}]", entry.result)
    return {
        "schema_version": 1,
        "session_id": session.session_id,
        "status": session.status,
        "agent": session.agent,
        "agent_fingerprint": session.agent_fingerprint,
        "agent_version": session.agent_version,
        "release": session.release,
        "pending": ctx.is_stopped,
        "pending_reason": session.pending_reason,
        "requester": None
        if session.requester is None
        else session.requester.model_dump(mode="json"),
        "context": ctx.data,
        "flow": {
            "root": ctx.trace.root,
            "graphs": {k: v.to_data() for k, v in ctx.trace.graphs.items()},
        },
        "traces": {k: state_data(v) for k, v in session.traces.items()},
        "hitl": session.hitl.model_dump(mode="json"),
        "ledger": {k: v.model_dump(mode="json") for k, v in session.ledger.items()},
        "messages": [m.model_dump(mode="json") for m in session.messages],
        "max_messages": session.max_messages,
        "events": session.events.stored_forms(),
        "max_events": session.events.max_events,
        "next_seq": session.events.next_seq,
        "history": _history_data(session),
        "parent": _parent_data(session),
        "family": session.family,
        "generation": session.generation,
        "effects": session.effects,
        "meta": session.meta,
    }


def _history_data(session: InMemoryAgentSession) -> dict[str, Any] | None:
    history = session._history
    history.settle(session)  # the newest checkpoint's patch, relative to what is saved
    return history.data()


def _parent_data(session: InMemoryAgentSession) -> dict[str, Any] | None:
    return None if session.parent is None else {"id": session.parent[0], "at": session.parent[1]}


_KEEP = {"schema_version", "session_id"}
_RUN_KEEP = {"tokens", "started"}


def _compact_run(run: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in run.items() if k in _RUN_KEEP or v not in (None, False, {}, [])}
    if "children" in out:
        out["children"] = {k: _compact_run(v) for k, v in out["children"].items()}
    return out


def canonical(data: dict[str, Any]) -> dict[str, Any]:
    """The stored form: defaults left out, events without their session id and None fields.

    Snapshots of idle sessions are mostly defaults and every event repeats the session id;
    leaving them out keeps a paused session small. Applied to model dumps and to
    :func:`session_data` alike, so both give the same text.
    """
    out = {k: v for k, v in data.items() if k in _KEEP or _DEFAULTS.get(k, _UNSET) != v}
    flow = out.get("flow")
    if flow is not None:
        out["flow"] = {
            "root": flow.get("root"),
            "graphs": {k: _compact_run(v) for k, v in flow.get("graphs", {}).items()},
        }
    history = out.get("history")
    if history is not None:  # (defaults left out, as History.data writes it)
        compact: dict[str, Any] = {
            "marks": [{k: v for k, v in m.items() if k != "back" or v} for m in history["marks"]]
        }
        if history.get("first"):
            compact["first"] = history["first"]
        if history.get("max", 50) != 50:
            compact["max"] = history["max"]
        out["history"] = compact
    if "events" in out:
        out["events"] = [
            {k: v for k, v in e.items() if v is not None and k != "session_id"}
            for e in out["events"]
        ]
    return out


def take_snapshot(session: InMemoryAgentSession) -> SessionSnapshot:
    """A validated snapshot of ``session``; a non-JSON context value raises
    NotSerializableError naming the key."""
    data = session_data(session)
    sid = session.session_id
    data["events"] = [{"session_id": sid, **e} for e in data["events"]]
    return SessionSnapshot.model_validate(data)


def _split(session: InMemoryAgentSession) -> tuple[str, str]:
    """The snapshot's text before and after ``events``, without braces:
    ``layout(canonical(session_data(session)))`` built in one pass (saves run it every
    time; a test holds the two equal). The captured state is dumped in one piece, which
    the history compares with its newest checkpoint at no extra cost."""
    ctx = session.context
    data = ctx.data
    for key, value in data.items():
        check_json(key, value)
    ledger = session.ledger
    for key, entry in ledger.items():
        check_json(f"ledger[{key}]", entry.result)
    core = canonical_dumps(core_values(session))
    history = session._history
    if history.marks:  # the newest checkpoint's patch, relative to what is saved
        history.settle(session, core)
    extra: dict[str, Any] = {"schema_version": 1, "session_id": session.session_id}
    if ledger:
        extra["ledger"] = {k: v.model_dump(mode="json") for k, v in ledger.items()}
    if session.max_messages != 50:
        extra["max_messages"] = session.max_messages
    log = session.events
    if log.max_events != 1000:
        extra["max_events"] = log.max_events
    if log.next_seq != 1:
        extra["next_seq"] = log.next_seq
    if session.parent is not None:
        extra["parent"] = _parent_data(session)
    if session.family is not None:
        extra["family"] = session.family
    extra["generation"] = session.generation
    if session.effects != "real":
        extra["effects"] = session.effects
    if session.meta:
        extra["meta"] = session.meta
    if session.release is not None:
        extra["release"] = session.release
    tail = canonical_dumps(extra)[1:-1]
    stored_history = history.text()  # (marks keep their text: most never change)
    if stored_history is not None:
        tail += f',"history":{stored_history}'
    return core[1:-1], tail


def layout(data: dict[str, Any]) -> str:
    """The stored text of canonical snapshot data: the state a checkpoint captures
    (sorted keys) first, then the event log, then the rest (sorted), then the history.
    A fixed order, not one sorted object: the first part is dumped once and serves the
    history too; the same data always gives the same text."""
    core = {k: v for k, v in data.items() if k in CORE_KEYS}
    rest = {k: v for k, v in data.items() if k not in CORE_KEYS and k not in _APART}
    events = data.get("events")
    return _join(
        canonical_dumps(core)[1:-1],
        f'"events":{canonical_dumps(events)}' if events else "",
        canonical_dumps(rest)[1:-1],
        f'"history":{canonical_dumps(data["history"])}' if data.get("history") else "",
    )


_APART = frozenset({"events", "history"})


def _join(*parts: str) -> str:
    return "{" + ",".join(p for p in parts if p) + "}"


def state_json(session: InMemoryAgentSession) -> str:
    """The canonical snapshot without its event log (stores keep the log apart, see
    :meth:`~intermission.core.events_log.EventLog.unsaved_chunk`)."""
    head, tail = _split(session)
    return _join(head, tail)


def snapshot_json(session: InMemoryAgentSession) -> str:
    """Canonical JSON text of a session's snapshot, event log included."""
    head, tail = _split(session)
    events = session.events.stored_json()
    return _join(head, "" if events == "[]" else f'"events":{events}', tail)


def _path(err: ValidationError) -> str:
    first = err.errors()[0]
    return ".".join(str(p) for p in first["loc"])


def check_size(text: str, session_id: str | None = None, extra: int = 0) -> str:
    """``text`` (snapshot JSON, or the part of it a store writes, ``extra`` characters
    short of the whole), unless the whole is larger than a snapshot may be (R50: the
    same limit for every store's save and every loader)."""
    limit = limits.MAX_SNAPSHOT_TEXT
    size = len(text) + extra
    if size > limit:
        raise SnapshotTooLargeError(size, limit, session_id)
    return text


def _decoded(data: str | bytes | bytearray) -> str:
    """Snapshot text as ``str`` (bytes in any encoding JSON allows): the limit counts
    characters, the same for text and bytes."""
    if isinstance(data, str):
        return data
    if len(data) > 4 * limits.MAX_SNAPSHOT_TEXT:  # (no character takes more than 4 bytes)
        raise SnapshotTooLargeError(len(data), limits.MAX_SNAPSHOT_TEXT)
    try:
        return bytes(data).decode(json.detect_encoding(data))
    except (UnicodeDecodeError, LookupError) as exc:
        raise SnapshotSchemaError(f"not valid JSON: not text ({exc})") from None


def parse_snapshot(data: Any) -> SessionSnapshot:
    """Validate a snapshot given as a model, dict or JSON text (typed errors only)."""
    return _parse(data)[0]


def _parse(data: Any) -> tuple[SessionSnapshot, list[Any] | None]:
    """The validated snapshot and, when it came as data, its raw event dicts."""
    if isinstance(data, SessionSnapshot):
        check_snapshot(data)
        return data, None
    if isinstance(data, (str, bytes, bytearray)):
        text = check_size(_decoded(data))
        try:
            data = loads(text, "the snapshot", limit=limits.MAX_SNAPSHOT_TEXT)
        except ValueError as exc:
            raise SnapshotSchemaError(f"not valid JSON: {exc}") from None
    elif isinstance(data, dict):
        # a dict may hold anything Python can (bytes, sets, NaN): what is not JSON is
        # refused here, so every value kept below is plain JSON data
        try:
            text = canonical_dumps(data)
        except (NotSerializableError, RecursionError, ValueError) as exc:
            raise SnapshotSchemaError(f"not JSON data: {exc}") from None
        try:
            data = loads(check_size(text), "the snapshot", limit=limits.MAX_SNAPSHOT_TEXT)
        except (RecursionError, ValueError) as exc:
            raise SnapshotSchemaError(f"not JSON data: {exc}") from None
    if not isinstance(data, dict):
        raise SnapshotSchemaError(f"a snapshot is a JSON object, not {type(data).__name__}")
    _refuse_surrogate_keys(text, data)
    version = data.get("schema_version")
    events = data.get("events")
    stored_events = events
    if isinstance(events, list):  # stored events leave out the session id (see canonical)
        sid = data.get("session_id")
        data = {**data, "events": [
            {"session_id": sid, **e} if isinstance(e, dict) else e for e in events
        ]}  # fmt: skip
    if version != SCHEMA_VERSION:
        raise SnapshotSchemaError(
            f"schema_version {version!r} is not supported (this intermission reads "
            f"{SCHEMA_VERSION}); upgrade intermission or migrate the snapshot",
            path="schema_version",
        )
    data = _unstrand(data)
    try:  # strict: "5" is not an int here; a snapshot is written by us, exactly typed
        snap = SessionSnapshot.model_validate(data, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SnapshotSchemaError(first["msg"], path=_path(exc)) from None
    except RecursionError:
        raise SnapshotSchemaError("nested too deeply") from None
    check_snapshot(snap)
    return snap, stored_events


def _refuse_surrogate_keys(text: str, data: Any) -> None:
    """A key with a lone surrogate anywhere (a tool argument's name, a node id) is refused:
    it would load, but the session could never be saved again (pydantic cannot write such
    a key). Values may hold them: they are stored escaped and come back unchanged."""
    where = surrogate_key_path(text, data)
    if where is not None:
        raise SnapshotSchemaError(
            "a key holds a lone surrogate (not Unicode text), which no snapshot keeps; "
            "decode such text with errors='replace' before it enters a session",
            path=where,
        )


def _unstrand(data: dict[str, Any]) -> dict[str, Any]:
    """A session saved before call UUIDs were made unique (R48) may hold two tasks under
    one id (a model gave two calls one id): it loads, its repeated ids renamed as today's
    agents name them (``id.2``…), in its tasks and in the tool calls the resume replays.
    Decisions recorded under a repeated id cannot say which call they were for: they are
    dropped, and the person decides again (nothing runs unapproved)."""
    hitl = data.get("hitl")
    tasks = hitl.get("tasks") if isinstance(hitl, dict) else None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        return data
    ids = [t.get("call_uuid") for t in tasks]
    repeated = {i for i in ids if isinstance(i, str) and ids.count(i) > 1}
    if not repeated:
        return data
    assert isinstance(hitl, dict)
    traces = data.get("traces")
    trace = traces.get(hitl.get("agent")) if isinstance(traces, dict) else None
    reason = trace.get("last_reason") if isinstance(trace, dict) else None
    calls = reason.get("tool_calls") if isinstance(reason, dict) else None
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        return data  # nothing to rename consistently: refused as before
    taken = {c.get("id") for c in calls} | set(ids)
    renamed_calls, fresh = [], []  # fresh: (old id, tool, args, new id), in call order
    seen: dict[str, int] = {}
    for c in calls:
        cid = c.get("id")
        if isinstance(cid, str) and cid in repeated:
            seen[cid] = seen.get(cid, 0) + 1
            new = cid
            if seen[cid] > 1:
                n = 2
                while f"{cid}.{n}" in taken:
                    n += 1
                new = f"{cid}.{n}"
                taken.add(new)
                c = {**c, "id": new}
            fresh.append((cid, c.get("name"), c.get("args"), new))
        renamed_calls.append(c)
    new_tasks = []
    for t in tasks:
        cid = t.get("call_uuid")
        if cid in repeated:
            match = next(
                (f for f in fresh if f[0] == cid and f[1] == t.get("tool_name")
                 and f[2] == t.get("args", {})),
                None,
            )  # fmt: skip
            if match is None:
                return data
            fresh.remove(match)
            t = {**t, "call_uuid": match[3]}
        new_tasks.append(t)
    decisions = hitl.get("decisions")
    expired = hitl.get("expired")
    fixed_hitl = {
        **hitl,
        "tasks": new_tasks,
        "decisions": {k: v for k, v in decisions.items() if k not in repeated}
        if isinstance(decisions, dict)
        else decisions,
        "expired": [e for e in expired if e not in repeated]
        if isinstance(expired, list)
        else expired,
    }
    assert isinstance(traces, dict) and isinstance(trace, dict) and isinstance(reason, dict)
    fixed_trace = {**trace, "last_reason": {**reason, "tool_calls": renamed_calls}}
    return {**data, "hitl": fixed_hitl, "traces": {**traces, hitl.get("agent"): fixed_trace}}


def check_snapshot(snap: SessionSnapshot) -> None:
    """What validation alone cannot see, checked at load (R42): values a store could not
    write back, and parts that contradict each other (a route with nothing to run, a
    decision for no task). Positions are checked against the graph when the session first
    meets it (the engine), since a snapshot does not carry its graph."""
    try:
        check_session_id(snap.session_id)
        # each value from its own root, as ``context.put`` and the save count its depth
        # (counted from the context, a value put at the limit would not load again, R50)
        check_json("context", dict.fromkeys(snap.context))
        for key, value in snap.context.items():
            check_json(f"context.{key}", value)
        for key, entry in snap.ledger.items():
            check_effect_key(key)
            check_json(f"ledger.{key}.result", entry.result)
        _check.count("max_events", snap.max_events, 0, MAX_EVENTS)
        _check.count("max_messages", snap.max_messages, 0, MAX_MESSAGES)
        _check.count("next_seq", snap.next_seq, 1, 2**62)
        for name, value in snap.meta.items():
            _check.text("a meta key", name, empty=False)
            check_json(f"meta.{name}", value)
    except IntermissionError as exc:
        raise SnapshotSchemaError(str(exc)) from None
    for name, trace in snap.traces.items():
        state_from(trace, f"traces.{name}")  # a registered kind is validated now
    tasks = {t.call_uuid for t in snap.hitl.tasks}
    if len(tasks) != len(snap.hitl.tasks):
        raise SnapshotSchemaError("two tasks share a call UUID", path="hitl.tasks")
    for uuid, record in snap.hitl.decisions.items():
        if uuid not in tasks or record.call_uuid != uuid:
            raise SnapshotSchemaError(
                "a decision for no task of the batch", path=f"hitl.decisions.{uuid}"
            )
    for gid, run in snap.flow.graphs.items():
        _check_run(run, f"flow.graphs.{gid}", 0)
    if snap.flow.root is not None and snap.flow.root not in snap.flow.graphs:
        raise SnapshotSchemaError("names no recorded graph", path="flow.root")
    if snap.history is not None:
        marks, most = snap.history.marks, snap.history.max
        off = most == 0 and not marks  # max_checkpoints=0: history switched off
        if not off and (not marks or snap.history.first < 0 or not 1 <= most <= MAX_EVENTS):
            raise SnapshotSchemaError("an empty or misnumbered history", path="history")
        for i, mark in enumerate(marks):
            if mark.n < 0 or not 1 <= mark.seq <= snap.next_seq:
                raise SnapshotSchemaError("a checkpoint beyond the log", path=f"history.marks.{i}")
            wrong = check_patch(mark.back) if mark.back else None
            if wrong is not None:
                raise SnapshotSchemaError(wrong, path=f"history.marks.{i}.back")


def _check_run(run: GraphRunModel, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise SnapshotSchemaError("subgraphs nested too deeply", path=path)
    if any(not t for t in run.tokens):
        raise SnapshotSchemaError("a position is an empty node id", path=f"{path}.tokens")
    if any(v < -1 for v in run.joins.values()) or any(v < 0 for v in run.loops.values()):
        raise SnapshotSchemaError("negative join or loop count", path=path)
    for key, child in run.children.items():
        _check_run(child, f"{path}.children.{key}", depth + 1)


def restore_session(session: InMemoryAgentSession, data: Any) -> None:
    """Fill a bare session object from snapshot data."""
    snap, raw_events = _parse(data)
    log = EventLog(snap.max_events)
    if raw_events is not None and len(raw_events) == len(snap.events):
        # keep the stored form next to the model: saving again re-uses it instead of
        # dumping every old event anew
        for event, raw in zip(snap.events, raw_events, strict=True):
            if "session_id" in raw or None in raw.values():
                # a dump with everything spelled out (model_dump_json): kept as stored
                raw = {k: v for k, v in raw.items() if v is not None and k != "session_id"}
            log.append_restored(event, raw)
    else:
        for event in snap.events:
            log.append(event)
    log.next_seq = snap.next_seq
    log.first_new_seq = snap.next_seq  # what a snapshot holds is not new to a store
    _fill(session, snap, log, data if isinstance(data, str) else None)


def restore_stored(
    session: InMemoryAgentSession, state: str, chunks: Sequence[tuple[int, str]]
) -> None:
    """Fill a bare session from a store: the snapshot without its log (validated now) and
    the log as ``(count, JSON array)`` chunks, oldest first (validated when first read).
    No chunks: a row written before the log was kept apart (its snapshot holds it), or an
    empty log."""
    if not chunks:
        restore_session(session, state)
        session.events.mark_stored(0, 0)  # the store holds none of these events apart
        return
    try:
        snap = SessionSnapshot.model_validate_json(state)
    except ValidationError:
        snap = _parse(state)[0]  # the same failure, reported as a typed error
    else:
        if may_hold_surrogate(state):  # (rare: then the text is read once more)
            _refuse_surrogate_keys(state, json.loads(state))
        check_snapshot(snap)
    if snap.events:
        raise SnapshotSchemaError("a stored row keeps its events apart", path="events")
    if len(chunks) == 1:
        count, text = chunks[0]
    else:
        count = sum(n for n, _ in chunks)
        text = "[" + ",".join(t[1:-1] for _, t in chunks if t != "[]") + "]"
    log = EventLog.from_stored(
        text, count, session_id=snap.session_id, max_events=snap.max_events,
        next_seq=snap.next_seq, parts=len(chunks),
    )  # fmt: skip
    _fill(session, snap, log, state)


def _run_of(model: GraphRunModel) -> GraphRun:
    """The engine's GraphRun from its validated model (fields copied, nothing re-checked)."""
    run = GraphRun()
    run.tokens = list(model.tokens)
    run.started = model.started
    run.ended = model.ended
    run.last = model.last
    run.joins = dict(model.joins)
    run.inclusive = list(model.inclusive)
    run.loops = dict(model.loops)
    run.children = {k: _run_of(v) for k, v in model.children.items()}
    run.visited = dict(model.visited)
    run.taken = dict(model.taken)
    run.failed = model.failed
    return run


def _fill(
    session: InMemoryAgentSession, snap: SessionSnapshot, log: EventLog, source: str | None = None
) -> None:
    """Fill ``session`` from a validated snapshot; ``source``: the JSON text it was read
    from (its history's base state is parsed from it only when needed)."""
    ctx = FlowContext(snap.session_id, snap.context)
    trace = FlowTrace()
    trace.root = snap.flow.root
    trace.graphs = {k: _run_of(v) for k, v in snap.flow.graphs.items()}
    ctx.trace = trace
    ctx.session = session
    ctx._stopped = snap.pending
    session.session_id = snap.session_id
    session.context = ctx
    session.max_messages = snap.max_messages
    session.messages = list(snap.messages)
    session.events = log
    session.traces = {k: state_from(v, f"traces.{k}") for k, v in snap.traces.items()}
    session.hitl = snap.hitl
    session.ledger = dict(snap.ledger)
    session.status = snap.status
    session.agent = snap.agent
    session.agent_fingerprint = snap.agent_fingerprint
    session.agent_version = snap.agent_version
    session.release = snap.release
    session.clock = SYSTEM_CLOCK
    session._reason = snap.pending_reason
    session.requester = snap.requester
    session.ledger_hook = None
    session.ledger_dirty = set(snap.ledger)  # not in any store yet: a save writes them
    session.store_version = 0
    session.claim_token = None
    session.parent = None if snap.parent is None else (snap.parent.id, snap.parent.at)
    session.effect_wait_s = 30.0
    session.family = snap.family
    # (a snapshot from before generations gets one now; its next save keeps it)
    session.generation = snap.generation or new_generation()
    session.effects = snap.effects
    session.meta = dict(snap.meta) if snap.meta else {}
    history = snap.history
    if history is None or not history.marks:
        session._history = History.from_data(
            None if history is None else {"marks": [], "max": history.max}, None
        )
    else:  # the newest patch starts from the state as stored: from its text, when known
        data = {
            "marks": [{"at": m.at, "n": m.n, "seq": m.seq, "back": m.back} for m in history.marks],
            "first": history.first,
            "max": history.max,
        }  # (the model's own values: it is dropped after the load)
        session._history = History.from_data(
            data, None if source is not None else core_text(session), source
        )
