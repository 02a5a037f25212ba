"""One AG-UI run against the store: the rules, the claim, the agent, the events.

A run works in a thread of its own and hands SSE frames to the response through a queue:
a client that disconnects stops reading, not the run, which finishes and saves (its effects
are in the ledger either way). Resuming is two claims, as the CLI does: record the
decisions and save (a crash after this loses nothing), then resume under a fresh claim. A
second server doing the same resume at once finds the claim held, waits, and then finds
the decisions applied: it replays the run that applied them (one effect, same outcome).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ag_ui import core as ag
from pydantic import TypeAdapter

from ..core.session import InMemoryAgentSession
from ..errors import (
    ConflictError,
    DecisionConflictError,
    IntermissionError,
    InvalidDecisionError,
    NothingToResumeError,
    SessionBusyError,
    SessionNotFoundError,
)
from ..hitl import HITL, decide_graph
from .events import ENDS, STARTS, Cursor, Translator, agui_messages, encode, state_of
from .interrupts import Plan, Refusal, decision_of, open_interrupts, plan

__all__ = ["Runs", "runs_of"]

log = logging.getLogger("intermission.agui")

ADAPTER = "agui:server"
"""Where the server keeps its own notes in a session's agent states (``traces``): which
AG-UI run id each run had, and the interrupts each pause announced."""
KEEP = 100
KEEP_IDS = 1000
BUSY_WAIT_S = 60.0
REFUSED_K = 1000
"""Refused runs record nothing: their events get ids after the session's last event."""

EVENT: TypeAdapter[Any] = TypeAdapter(ag.Event)
Frame = str
_END = object()


def _notes(session: Any) -> dict[str, Any]:
    notes = session.traces.get(ADAPTER)
    if not isinstance(notes, dict):
        notes = {"kind": "agui", "runs": {}, "interrupts": {}}
    return notes


def _remember(session: Any, run_id: str | None, agui_run: str, end_seq: int | None,
              closing: list[Any], ids: dict[int, str]) -> None:  # fmt: skip
    """Note the run's AG-UI id and, for a pause, the events that closed it (snapshots and
    outcome as they were then), so a replay sends what the live stream sent."""
    notes = _notes(session)
    runs = dict(notes.get("runs") or {})
    if run_id:
        runs[run_id] = agui_run
    known = dict(notes.get("ids") or {})
    known.update({str(k): v for k, v in ids.items()})
    kept = dict(notes.get("interrupts") or {})
    if end_seq is not None and closing:
        kept[str(end_seq)] = [
            e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in closing
        ]
    session.traces[ADAPTER] = {
        "kind": "agui",
        "runs": dict(list(runs.items())[-KEEP:]),
        "interrupts": dict(list(kept.items())[-KEEP:]),
        "ids": dict(list(known.items())[-KEEP_IDS:]),
    }


def message_ids(session: Any, first: int, user_id: str | None, tr: Translator) -> dict[int, str]:
    """The ids the client saw for the session's messages: those noted by earlier runs, and
    for this run's (from position ``first``) the user's own and the streamed texts'."""
    ids = {int(k): v for k, v in (_notes(session).get("ids") or {}).items()}
    texts = iter(tr.texts)
    for i, m in enumerate(session.messages[first:], start=first):
        if m.role == "user" and user_id:
            ids[i] = user_id
        elif m.role == "assistant" and m.content:
            found = next(texts, None)
            if found:
                ids[i] = found
    return ids


def runs_of(session: Any) -> list[list[Any]]:
    """The session's log cut into outer runs (a team's inner agents stay inside theirs)."""
    out: list[list[Any]] = []
    outer: str | None = None
    for event in session.events:
        if outer is None:
            if event.kind in STARTS:
                outer = event.run_id
                out.append([event])
            continue
        out[-1].append(event)
        if event.kind in ENDS and event.run_id == outer:
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
    notes = _notes(session)
    stored = notes.get("interrupts") or {}
    tid = session.session_id
    rid = run_id or (notes.get("runs") or {}).get(events[0].run_id) or events[0].run_id

    def finish(end: Any) -> list[Any]:
        if not end.pending:
            return [_finished(tid, rid, end)]
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
        return _paused(session, tid, rid, found, tr)

    tr = Translator(tid, rid, finish)
    for event in events:
        for k, out in enumerate(tr.feed(event)):
            yield (event.seq, k), out


def _finished(tid: str, rid: str, end: Any) -> Any:
    return ag.RunFinishedEvent(
        thread_id=tid,
        run_id=rid,
        result=end.content or None,
        outcome=ag.RunFinishedSuccessOutcome(type="success"),
    )


def _paused(session: Any, tid: str, rid: str, interrupts: list[ag.Interrupt],
            tr: Translator, ids: dict[int, str] | None = None) -> list[Any]:  # fmt: skip
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


def _user_id(messages: list[Any]) -> str | None:
    for m in reversed(messages):
        if getattr(m, "role", None) == "user":
            return str(m.id)[:200]
    return None


def _prompt_of(messages: list[Any]) -> str | None:
    for m in reversed(messages):
        if getattr(m, "role", None) == "user":
            content = m.content
            if isinstance(content, str):
                return content
            parts = [getattr(p, "text", "") for p in content or []]
            return "".join(p for p in parts if isinstance(p, str)) or None
    return None


class Runs:
    """Runs agents from ``agents`` (name → factory) on sessions of ``store``."""

    def __init__(self, agents: Mapping[str, Callable[[], Any]], store: Any) -> None:
        self.agents = agents
        self.store = store

    def stream(self, name: str, data: ag.RunAgentInput) -> Iterator[Frame]:
        """The SSE frames of one run (the run goes on if the reader stops)."""
        frames: queue.Queue[Any] = queue.Queue()
        worker = threading.Thread(
            target=self._work, args=(name, data, frames.put), name="agui-run", daemon=True
        )
        worker.start()
        while True:
            item = frames.get()
            if item is _END:
                return
            yield item

    def _work(self, name: str, data: ag.RunAgentInput, put: Callable[[Any], None]) -> None:
        state = {"started": False, "last": 0}

        def send(cursor: Cursor, event: Any) -> None:
            if event.type == ag.EventType.RUN_STARTED:
                state["started"] = True
            state["last"] = max(state["last"], cursor[0])
            put(encode(event, cursor))

        try:
            self._run(name, data, send, state)
        except Refusal as exc:
            self._refuse(data, send, state, exc.code, exc.message)
        except DecisionConflictError as exc:
            self._refuse(data, send, state, "DECISION_CONFLICT", str(exc))
        except IntermissionError as exc:
            self._refuse(data, send, state, type(exc).__name__, str(exc))
        except Exception:  # a bug or a failing agent: the client gets a line, the log the rest
            log.exception("AG-UI run %s of thread %s failed", data.run_id, data.thread_id)
            self._refuse(data, send, state, "INTERNAL_ERROR", "the run failed on the server")
        finally:
            put(_END)

    def _refuse(self, data: ag.RunAgentInput, send: Callable[[Cursor, Any], None],
                state: dict[str, Any], code: str, message: str) -> None:  # fmt: skip
        base = state["last"]
        if not base:
            try:
                base = self.store.load(data.thread_id).events.next_seq - 1
            except Exception:
                base = 0
        k = REFUSED_K
        if not state["started"]:
            send((base, k), ag.RunStartedEvent(thread_id=data.thread_id, run_id=data.run_id))
            k += 1
        send((base, k), ag.RunErrorEvent(message=message, code=code))

    def _run(self, name: str, data: ag.RunAgentInput, send: Callable[[Cursor, Any], None],
             state: dict[str, Any]) -> None:  # fmt: skip
        tid = data.thread_id
        prompt = _prompt_of(data.messages)
        deadline = time.monotonic() + BUSY_WAIT_S
        pause = 0.02
        while True:
            try:
                session = self.store.load(tid)
            except SessionNotFoundError:
                session = None
            if session is None:
                if data.resume:
                    raise Refusal("THREAD_NOT_FOUND", f"no thread {tid!r} to resume")
                if not prompt:
                    raise Refusal("NO_PROMPT", "a new run needs a user message")
                try:
                    self.store.save(InMemoryAgentSession(tid))
                except ConflictError:
                    continue  # created meanwhile by another run: read it again
                self._execute(name, data, prompt, send, claim=True)
                return
            if session.agent is not None and session.agent != name:
                raise Refusal("WRONG_AGENT", f"thread {tid!r} belongs to agent {session.agent!r}")
            p = plan(session, data.resume, prompt, session.clock.now_ms())
            if p.kind == "replay":
                self._replay(session, p, data, send)
                return
            try:
                if p.kind == "prompt":
                    self._execute(name, data, p.prompt, send, claim=True)
                    return
                if p.record:
                    self._record(name, tid, data, p)
                self._execute(name, data, None, send, claim=False)
                return
            except (SessionBusyError, NothingToResumeError):
                # another server holds or has just finished this thread: look again
                if time.monotonic() > deadline:
                    raise Refusal(
                        "THREAD_BUSY", f"thread {tid!r} is being run elsewhere; try again"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def _record(self, name: str, tid: str, data: ag.RunAgentInput, p: Plan) -> None:
        self.agents[name]()  # its tools validate edited arguments (built in this process)
        with self.store.resume(tid) as s:
            fresh = plan(s, data.resume, None, s.clock.now_ms())  # the claim's truth
            if fresh.kind != "resume" or not fresh.record:
                return
            try:
                if s.hitl.tasks:
                    HITL.submit_all(s, {i: decision_of(v) for i, v in fresh.record.items()})
                else:
                    (v,) = fresh.record.values()
                    if v.edited is not None:
                        raise Refusal("INVALID_PAYLOAD", "a confirmation takes no editedArgs")
                    decide_graph(
                        s, "APPROVE" if v.approve else "REJECT",
                        reviewer=v.reviewer, reason=v.reason,
                    )  # fmt: skip
            except DecisionConflictError:
                raise
            except InvalidDecisionError as exc:
                # (DeadlinePassedError, where the core has it: the deadline passed meanwhile)
                code = (
                    "INTERRUPT_EXPIRED" if "Deadline" in type(exc).__name__ else "INVALID_PAYLOAD"
                )
                raise Refusal(code, f"{exc}; nothing was changed") from None

    def _execute(self, name: str, data: ag.RunAgentInput, prompt: str | None,
                 send: Callable[[Cursor, Any], None], *, claim: bool) -> None:  # fmt: skip
        agent = self.agents[name]()
        tid, rid = data.thread_id, data.run_id
        holder = self.store.claim(tid) if claim else self.store.resume(tid)
        with holder as s:
            outer: dict[str, Any] = {}

            def finish(end: Any) -> list[Any]:
                outer["end"] = end
                if not end.pending:
                    return [_finished(tid, rid, end)]
                found = open_interrupts(s)
                if not found:  # paused for another reason: still not a success (AG-UI 1.0)
                    found = [ag.Interrupt(id=f"pending-{end.seq}", reason="input_required",
                                          message=s.pending_reason)]  # fmt: skip
                outer["ids"] = message_ids(s, first, user_id, tr)
                outer["closing"] = _paused(s, tid, rid, found, tr, outer["ids"])
                return list(outer["closing"])

            tr = Translator(tid, rid, finish)
            last = s.events.next_seq - 1
            first = len(s.messages)
            user_id = _user_id(data.messages) if prompt else None
            for event in agent.prompt(prompt).session(s).stream():
                last = event.seq
                if "run" not in outer:
                    outer["run"] = event.run_id
                for k, out in enumerate(tr.feed(event)):
                    send((event.seq, k), out)
            end = outer.get("end")
            _remember(s, outer.get("run"), rid, end.seq if end is not None else None,
                      outer.get("closing") or [],
                      outer.get("ids") or message_ids(s, first, user_id, tr))  # fmt: skip
            if not tr.done:  # the run ended without its end event (cancelled)
                for k, out in enumerate(
                    tr.close() + tr.error("the run did not finish", "RUN_INCOMPLETE")
                ):
                    send((last, 500 + k), out)

    def _replay(self, session: Any, p: Plan, data: ag.RunAgentInput,
                send: Callable[[Cursor, Any], None]) -> None:  # fmt: skip
        for events in runs_of(session):
            if events[0].seq <= p.replay_seq <= events[-1].seq or events[0].seq > p.replay_seq:
                for cursor, out in replay(session, None, data.run_id, events):
                    send(cursor, out)
                return
        raise Refusal("NOTHING_TO_REPLAY", "the run that applied this resume is not in the log")
