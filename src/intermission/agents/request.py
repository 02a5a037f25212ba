"""Requests: ``agent.prompt(text).session(s)`` then ``call()``, ``call_async()`` or ``stream()``."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._sync import run_sync
from ..core.session import AgentSession, InMemoryAgentSession
from ..errors import UsageError
from ..events import Event

if TYPE_CHECKING:
    import asyncio

__all__ = ["AgentRequest", "AgentResponse", "EventStream", "Runner"]

Runner = Callable[
    [AgentSession, "str | None", "Callable[[Event], None] | None"], Coroutine[Any, Any, Any]
]


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """The result of one request."""

    content: str
    """The final answer (empty for a generic pending, R6)."""
    is_abnormal: bool
    trace: Any
    session: AgentSession

    @property
    def is_pending(self) -> bool:
        """True when the session is parked after this request."""
        return self.session.is_pending


class AgentRequest:
    """A prepared request; pick a session, then call, await or stream it."""

    def __init__(self, runner: Runner, prompt: str | None) -> None:
        self._runner = runner
        self._prompt = prompt or None
        self._session: AgentSession | None = None

    def session(self, session: AgentSession) -> AgentRequest:
        """Run on ``session`` (default: a fresh in-memory session)."""
        if not isinstance(getattr(session, "session_id", None), str) or not hasattr(
            session, "context"
        ):
            raise UsageError(
                "session() takes a session (InMemoryAgentSession.of(id), or one loaded from "
                f"a store), not {type(session).__name__}"
            )
        self._session = session
        return self

    def _target(self) -> AgentSession:
        if self._session is None:
            self._session = InMemoryAgentSession.of()
        return self._session

    def call(self) -> AgentResponse:
        """Run to completion or to a pause; works inside a running loop (a notebook cell)."""
        result: AgentResponse = run_sync(self._runner(self._target(), self._prompt, None))
        return result

    async def call_async(self) -> AgentResponse:
        """Async :meth:`call`."""
        result: AgentResponse = await self._runner(self._target(), self._prompt, None)
        return result

    def stream(self) -> EventStream:
        """Events as they happen: ``async for`` or plain ``for`` (R24–R26)."""
        return EventStream(self._runner, self._target(), self._prompt)


_DONE = object()


class _Events:
    """What ``async for`` iterates. An async generator left by ``break`` is closed only when
    the loop gets round to finalizing it; the run would go on meanwhile and the next
    request on the session would meet it. This one cancels the run as soon as it is
    dropped (the generator's own close then awaits the unwinding)."""

    __slots__ = ("_gen", "_stream")

    def __init__(self, stream: EventStream) -> None:
        self._stream = stream
        self._gen = stream._aiter()

    def __aiter__(self) -> _Events:
        return self

    def __anext__(self) -> Any:
        return self._gen.__anext__()

    def __del__(self) -> None:
        import asyncio

        task = self._stream._task
        if task is None or task.done():
            return
        loop = task.get_loop()
        try:
            here = asyncio.get_running_loop() is loop
        except RuntimeError:
            here = False
        if here:
            task.cancel()  # at once: the next line of the caller may start a new request
            return
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass  # the loop is closed: the run ended with it


class EventStream:
    """An event stream over one request. Closing it early (``aclose()``, ``dispose()``,
    breaking a ``for``) cancels the run: no RunEnd is emitted and the session stays
    resumable (R26). An unhandled error is raised from the iteration."""

    def __init__(self, runner: Runner, session: AgentSession, prompt: str | None) -> None:
        self._runner = runner
        self._session = session
        self._prompt = prompt
        self._task: asyncio.Task[Any] | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.response: AgentResponse | None = None
        """The response, once the stream completed."""

    # -- async ------------------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[Event]:
        return _Events(self)

    async def _aiter(self) -> AsyncIterator[Event]:
        import asyncio

        q: asyncio.Queue[Any] = asyncio.Queue()
        self._queue = q

        async def run() -> None:
            try:
                self.response = await self._runner(self._session, self._prompt, q.put_nowait)
            except BaseException as exc:
                q.put_nowait(exc)
                raise
            q.put_nowait(_DONE)

        self._task = asyncio.ensure_future(run())
        try:
            while True:
                item = await q.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    if isinstance(item, asyncio.CancelledError):
                        return
                    raise item
                yield item
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Cancel the run if it is still going (no RunEnd, session resumable)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except BaseException:
                pass
        elif task is not None and task.done() and not task.cancelled():
            task.exception()  # mark retrieved: the error was raised from iteration

    # -- sync -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Event]:
        import asyncio
        import queue

        q: queue.Queue[Any] = queue.Queue()
        ready = threading.Event()

        def worker() -> None:
            loop = asyncio.new_event_loop()
            self._thread_loop = loop

            async def run() -> None:
                self._task = asyncio.current_task()
                ready.set()
                self.response = await self._runner(self._session, self._prompt, q.put)

            try:
                loop.run_until_complete(run())
                q.put(_DONE)
            except asyncio.CancelledError:
                q.put(_DONE)
            except BaseException as exc:
                q.put(exc)
            finally:
                ready.set()
                loop.close()

        thread = threading.Thread(target=worker, name="intermission-stream", daemon=True)
        self._thread = thread
        thread.start()
        try:
            while True:
                item = q.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            ready.wait()
            self.dispose()
            thread.join()

    def dispose(self) -> None:
        """Sync twin of :meth:`aclose` (the seed's ``Disposable.dispose()``): cancel the run
        and return once it has unwound, so the session is ready for the next request."""
        loop, task = self._thread_loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop closed meanwhile: the run already ended
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()  # a tool already running finishes first (R2), then the run ends

    def collect(self) -> list[Event]:
        """Consume the whole stream synchronously and return its events."""
        return list(self)
