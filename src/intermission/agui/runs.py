"""The AG-UI runs of one server: each in a thread of its own, the runs in flight, the stop.

A run works in a thread and hands SSE frames to the response through an asyncio queue
(the response awaits it, holding no threadpool slot): a client that disconnects stops
reading, not the run, which finishes and saves (its effects are in the ledger either way).
What a run does is decided under its thread's claim (see :mod:`intermission.agui.claimed`).

A stop is graceful: :meth:`Runs.stop` refuses new runs from then on, and :meth:`Runs.drain`
waits — up to the drain time from the stop — for the runs in flight, those whose client
left included. A run still going then is logged and its claim released: the next server
can take the thread at once instead of waiting out a lease, and an effect the run had
started stays marked started in the ledger (an unknown outcome a person resolves), never
run twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ag_ui import core as ag

from ..errors import (
    AgentMigrationError,
    AgentVersionError,
    DecisionConflictError,
    IntermissionError,
)
from ..principals import Principal
from .claimed import Claimed
from .interrupts import Refusal
from .served import Served
from .sse import Cursor, encode

__all__ = ["DEFAULT_DRAIN_S", "Runs"]

log = logging.getLogger("intermission.agui")

DEFAULT_DRAIN_S = 30.0
"""How long a stopping server waits for its runs in flight."""
POLL_S = 0.1
"""How often a drain looks again at when it ends (a second ^C ends it at once)."""
REFUSED_K = 1000
"""Refused runs record nothing: their events get ids after the session's last event."""

Frame = str
_END = object()


class _Live:
    """A run in flight: its thread, run id and the claim it holds (token), if any."""

    __slots__ = ("claim", "run_id", "since", "thread_id")

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.claim: str | None = None
        self.since = time.monotonic()


class Runs:
    """Runs the agents ``agents`` serves on sessions of ``store`` (each run on its
    session's version: see :class:`~intermission.agui.served.Served`)."""

    def __init__(
        self,
        agents: Served,
        store: Any,
        drain_s: float = DEFAULT_DRAIN_S,
    ) -> None:
        self.agents = agents
        self.store = store
        self.drain_s = drain_s
        self.stopping: float | None = None
        """When the drain ends (monotonic seconds), once a stop began."""
        self.hurried = False
        """True once a second interrupt ended the drain early."""
        self._live: set[_Live] = set()
        self._changed = threading.Condition()

    def stop(self) -> None:
        """Refuse new runs from now on; the drain time starts."""
        # no lock: a signal handler calls this on the thread that may be holding it
        if self.stopping is None:
            self.stopping = time.monotonic() + self.drain_s

    def hurry(self) -> None:
        """End the drain now (a second ^C): the runs still going are given up at once."""
        # no lock, as in stop(): drain() looks at the time it may wait at least every
        # POLL_S seconds
        self.stop()
        self.hurried = True
        self.stopping = time.monotonic()

    def enter(self, thread_id: str, what: str) -> object | None:
        """Count work beside the runs in the drain (a Slack click's decision, which may
        resume the run): a token for :meth:`leave`, or None once a stop began (refused,
        as a new run is)."""
        live = _Live(thread_id, what)
        with self._changed:
            if self.stopping is not None:
                return None
            self._live.add(live)
        return live

    def leave(self, token: object) -> None:
        """That work (:meth:`enter`) ended."""
        with self._changed:
            self._live.discard(token)
            self._changed.notify_all()

    def start(
        self, name: str, data: ag.RunAgentInput, principal: Principal | None = None
    ) -> AsyncIterator[Frame] | None:
        """Start a run and return its SSE frames (the run goes on if the reader stops);
        None once a stop began. Call from the server's event loop. ``principal``: the
        authenticated caller (it decides the resume, it asks the prompt)."""
        loop = asyncio.get_running_loop()
        frames: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(frames.put_nowait, item)
            except RuntimeError:  # the server's loop is gone: the run still finishes, saved
                pass

        live = _Live(data.thread_id, data.run_id)
        with self._changed:
            if self.stopping is not None:
                return None
            self._live.add(live)
        worker = threading.Thread(  # (it runs in the request's context: a trace continues)
            target=contextvars.copy_context().run,
            args=(self._work, name, data, put, live, principal),
            name="agui-run", daemon=True,
        )  # fmt: skip
        worker.start()
        return self._frames(frames)

    @staticmethod
    async def _frames(frames: asyncio.Queue[Any]) -> AsyncIterator[Frame]:
        while True:
            item = await frames.get()
            if item is _END:
                return
            yield item

    def drain(self) -> list[str]:
        """Wait for the runs in flight until the drain ends (``drain_s`` after
        :meth:`stop`); release the claims of those still going, log and return them."""
        self.stop()
        assert self.stopping is not None
        with self._changed:
            while self._live and (left := self.stopping - time.monotonic()) > 0:
                self._changed.wait(min(left, POLL_S))
            late = list(self._live)
        out: list[str] = []
        for live in late:
            what = f"AG-UI run {live.run_id!r} of thread {live.thread_id!r}"
            claim = live.claim
            release = getattr(self.store, "_release", None)
            if claim is not None and callable(release):
                try:
                    release(live.thread_id, claim)
                    what += (
                        " (claim released: an effect it had started has an unknown outcome "
                        "a person resolves)"
                    )
                except IntermissionError as exc:
                    what += f" (claim left to lapse: {type(exc).__name__})"
            if self.hurried:
                log.warning("%s was given up at a second interrupt", what)
            else:
                log.warning("%s did not finish within the %g s drain", what, self.drain_s)
            out.append(what)
        return out

    def _holding(self, live: _Live) -> Callable[[str, str | None], None]:
        def holding(_thread: str, token: str | None) -> None:
            live.claim = token

        return holding

    def _work(self, name: str, data: ag.RunAgentInput, put: Callable[[Any], None],
              live: _Live, principal: Principal | None = None) -> None:  # fmt: skip
        state = {"started": False, "last": 0}

        def send(cursor: Cursor, event: Any) -> None:
            if event.type == ag.EventType.RUN_STARTED:
                state["started"] = True
            state["last"] = max(state["last"], cursor[0])
            put(encode(event, cursor))

        run: Claimed | None = None
        try:
            agent = self.agents.newest(name)  # (a new thread's; a stored one runs its own)
            run = Claimed(self.store, agent, name, data, send, self._holding(live), principal,
                          pick=self.agents.for_session)  # fmt: skip
            run.run()
        except Refusal as exc:
            self._refuse(data, send, state, run, exc.code, exc.message)
        except DecisionConflictError as exc:
            self._refuse(data, send, state, run, "DECISION_CONFLICT", str(exc))
        except AgentVersionError as exc:  # (raised by the request itself: still nothing ran)
            self._refuse(data, send, state, run, "AGENT_VERSION", str(exc))
        except AgentMigrationError as exc:
            self._refuse(data, send, state, run, "AGENT_MIGRATION", str(exc))
        except IntermissionError as exc:
            self._refuse(data, send, state, run, type(exc).__name__, str(exc))
        except Exception:  # a bug or a failing agent: the client gets a line, the log the rest
            log.exception("AG-UI run %s of thread %s failed", data.run_id, data.thread_id)
            self._refuse(data, send, state, run, "INTERNAL_ERROR", "the run failed on the server")
        finally:
            put(_END)
            with self._changed:
                self._live.discard(live)
                self._changed.notify_all()

    def _refuse(self, data: ag.RunAgentInput, send: Callable[[Cursor, Any], None],
                state: dict[str, Any], run: Claimed | None, code: str,
                message: str) -> None:  # fmt: skip
        base = state["last"] or (run.base if run is not None else 0)
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
