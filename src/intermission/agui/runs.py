"""One AG-UI run against the store: the rules, the claim, the agent, the events.

A run works in a thread of its own and hands SSE frames to the response through an asyncio
queue (the response awaits it, holding no threadpool slot):
a client that disconnects stops reading, not the run, which finishes and saves (its effects
are in the ledger either way). Resuming is two claims, as the CLI does: record the
decisions and save (a crash after this loses nothing), then resume under a fresh claim. A
second server doing the same resume at once finds the claim held, waits, and then finds
the decisions applied: it replays the run that applied them (one effect, same outcome).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ag_ui import core as ag

from ..core.session import InMemoryAgentSession
from ..errors import (
    ConflictError,
    DeadlinePassedError,
    DecisionConflictError,
    DecisionRefusedError,
    IntermissionError,
    InvalidDecisionError,
    NothingToResumeError,
    ReviewerNotAllowedError,
    SessionBusyError,
    SessionNotFoundError,
)
from ..hitl import HITL, decide_graph
from ..hitl.refusals import write_refusal
from ..principals import Actor, Principal
from .events import Translator
from .interrupts import (
    Plan,
    Refusal,
    _iso,
    actor_of_resume,
    decision_of,
    open_interrupts,
    plan,
)
from .replay import (
    finished,
    message_ids,
    paused,
    remember,
    replay,
    run_named,
    runs_of,
    seen_message_ids,
)
from .sse import Cursor, encode

__all__ = ["Runs"]

log = logging.getLogger("intermission.agui")

BUSY_WAIT_S = 5.0
"""How long a run waits for another holder of its thread before THREAD_BUSY: enough for a
concurrent resume to finish (then it is replayed), short of a dead server's lease (minutes:
the answer names when that claim lapses)."""
REFUSED_K = 1000
"""Refused runs record nothing: their events get ids after the session's last event."""

Frame = str
_END = object()


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

    async def stream(
        self, name: str, data: ag.RunAgentInput, principal: Principal | None = None
    ) -> AsyncIterator[Frame]:
        """The SSE frames of one run (the run goes on if the reader stops). The reader
        awaits an asyncio queue the run's thread fills: a waiting response holds no
        threadpool slot, so reads stay prompt whatever runs are in flight. ``principal``:
        the authenticated caller (it decides the resume, it asks the prompt)."""
        loop = asyncio.get_running_loop()
        frames: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(frames.put_nowait, item)
            except RuntimeError:  # the server's loop is gone: the run still finishes, saved
                pass

        worker = threading.Thread(
            target=self._work, args=(name, data, put, principal), name="agui-run", daemon=True
        )
        worker.start()
        while True:
            item = await frames.get()
            if item is _END:
                return
            yield item

    def _work(self, name: str, data: ag.RunAgentInput, put: Callable[[Any], None],
              principal: Principal | None = None) -> None:  # fmt: skip
        state = {"started": False, "last": 0}

        def send(cursor: Cursor, event: Any) -> None:
            if event.type == ag.EventType.RUN_STARTED:
                state["started"] = True
            state["last"] = max(state["last"], cursor[0])
            put(encode(event, cursor))

        try:
            self._run(name, data, send, state, principal)
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
             state: dict[str, Any], principal: Principal | None = None) -> None:  # fmt: skip
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
                self._execute(name, data, prompt, send, claim=True, principal=principal)
                return
            if session.agent is not None and session.agent != name:
                raise Refusal("WRONG_AGENT", f"thread {tid!r} belongs to agent {session.agent!r}")
            last = _user_id(data.messages)
            if prompt and last is not None and last in seen_message_ids(session):
                prompt = None  # the client re-sent its history: no new user message
            done = None if data.resume or prompt else run_named(session, data.run_id)
            if done is not None:  # a retried POST, nothing new in it: that run again
                for cursor, out in replay(session, None, data.run_id, done):
                    send(cursor, out)
                return
            p = plan(session, data.resume, prompt, session.clock.now_ms(), principal, data.run_id)
            if p.kind == "replay":
                self._replay(session, p, data, send)
                return
            try:
                if p.kind == "prompt":
                    self._execute(name, data, p.prompt, send, claim=True, principal=principal)
                    return
                if p.record:
                    self._record(name, tid, data, p, principal)
                self._execute(name, data, None, send, claim=False)
                return
            except (SessionBusyError, NothingToResumeError):
                # another server holds or has just finished this thread: look again
                if time.monotonic() > deadline:
                    raise Refusal("THREAD_BUSY", self._busy(tid)) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def _busy(self, tid: str) -> str:
        """Who holds the thread and when that claim lapses (a dead holder's lease only
        lapses then; a live one renews it)."""
        holder = getattr(self.store, "_holder", lambda _: None)(tid)
        until = getattr(self.store, "_claim_until", lambda _: None)(tid)
        who = f" by {holder}" if holder else ""
        when = (
            f"; its claim lapses at {_iso(until)} unless its holder is alive and renews it"
            if until is not None
            else ""
        )
        return f"thread {tid!r} is being run elsewhere{who}{when}; try again later"

    def _record(self, name: str, tid: str, data: ag.RunAgentInput, p: Plan,
                principal: Principal | None = None) -> None:  # fmt: skip
        agent = self.agents[name]()  # its tools validate edited arguments (R49)
        with self.store.resume(tid) as s:
            fresh = plan(s, data.resume, None, s.clock.now_ms(), principal, data.run_id)
            if fresh.kind != "resume" or not fresh.record:
                return
            who: Actor | None = actor_of_resume(principal, next(iter(fresh.record.values())))
            try:
                if s.hitl.tasks:
                    HITL.submit_all(
                        s, {i: decision_of(v) for i, v in fresh.record.items()}, agent=agent,
                        principal=who,
                    )  # fmt: skip
                else:
                    (v,) = fresh.record.values()
                    if v.edited is not None:
                        raise Refusal("INVALID_PAYLOAD", "a confirmation takes no editedArgs")
                    decide_graph(
                        s, "APPROVE" if v.approve else "REJECT", reason=v.reason, principal=who,
                    )  # fmt: skip
            except InvalidDecisionError as exc:
                write_refusal(self.store, tid, exc)  # who tried what, why refused
                if isinstance(exc, DecisionConflictError):
                    raise
                if isinstance(exc, DeadlinePassedError):  # it passed while it was read
                    raise Refusal("INTERRUPT_EXPIRED", f"{exc}") from None
                if isinstance(exc, ReviewerNotAllowedError):
                    raise Refusal("REVIEWER_NOT_ALLOWED", f"{exc}") from None
                if isinstance(exc, DecisionRefusedError):
                    raise Refusal("DECISION_REFUSED", f"{exc}") from None
                raise Refusal("INVALID_PAYLOAD", f"{exc}; nothing was changed") from None

    def _execute(self, name: str, data: ag.RunAgentInput, prompt: str | None,
                 send: Callable[[Cursor, Any], None], *, claim: bool,
                 principal: Principal | None = None) -> None:  # fmt: skip
        agent = self.agents[name]()
        tid, rid = data.thread_id, data.run_id
        holder = self.store.claim(tid) if claim else self.store.resume(tid)
        with holder as s:
            outer: dict[str, Any] = {}

            def finish(end: Any) -> list[Any]:
                outer["end"] = end
                if not end.pending:
                    return [finished(tid, rid, end)]
                found = open_interrupts(s)
                if not found:  # paused for another reason: still not a success (AG-UI 1.0)
                    found = [ag.Interrupt(id=f"pending-{end.seq}", reason="input_required",
                                          message=s.pending_reason)]  # fmt: skip
                outer["ids"] = message_ids(s, first, user_id, tr)
                outer["closing"] = paused(s, tid, rid, found, tr, outer["ids"])
                return list(outer["closing"])

            tr = Translator(tid, rid, finish)
            last = s.events.next_seq - 1
            first = len(s.messages)
            user_id = _user_id(data.messages) if prompt else None
            request = agent.prompt(prompt).session(s)
            if prompt and principal is not None:  # who asks is recorded on what it asks for
                request = request.principal(Actor(
                    name=principal.name, roles=sorted(principal.roles), via="agui",
                    authenticated=True,
                ))  # fmt: skip
            for event in request.stream():
                last = event.seq
                if "run" not in outer:
                    outer["run"] = event.run_id
                for k, out in enumerate(tr.feed(event)):
                    send((event.seq, k), out)
            end = outer.get("end")
            remember(s, outer.get("run"), rid, end.seq if end is not None else None,
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
