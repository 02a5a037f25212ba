"""Event streams that pull: the run advances only as its reader asks for events (R24–R26,
R41).

A run emits events into a :class:`Channel` and then waits at its next check point
(``RunScope.pace``) until the reader has taken them and asks for more. So a reader that
stops — ``break``, ``aclose()``, ``dispose()``, cancelling its task, dropping the stream —
stops the run where it stands: a tool whose ``ToolCallStartEvent`` was the last event read
has not started, and never will in this request. A tool that had started finishes
(shielded from the cancel) and is recorded; the session stays resumable.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

from .._concurrency import IN_BROWSER, run_sync, wind_down
from ..core.session import AgentSession
from ..events import Event

if TYPE_CHECKING:
    import asyncio

    from .request import AgentResponse

__all__ = ["Channel", "EventStream", "Runner"]

Runner = Callable[
    [
        AgentSession,
        "str | None",
        "Callable[[Event], None] | None",
        "Callable[[], Coroutine[Any, Any, None]] | None",
    ],
    Coroutine[Any, Any, Any],
]
"""``runner(session, prompt, sink, pacer)``: one request (see ``AgentBase._request``)."""

_END: Any = object()


class Channel:
    """The hand-over between a run and its reader (one event loop).

    ``wanted`` is set while the reader waits with nothing left to read; ``put`` clears it,
    so the run's next ``pace`` waits until the reader has taken what was put and asks
    again. Events put between two check points wait in ``buffer``: nothing with an effect
    runs between check points (a tool starts only after the one after its start event).
    """

    def __init__(self) -> None:
        import asyncio

        self.buffer: deque[Any] = deque()
        self.wanted = asyncio.Event()
        self.ready = asyncio.Event()
        self.finished = False
        self.error: BaseException | None = None

    def put(self, event: Event) -> None:
        """Called by the run for each event (synchronously, from ``RunScope.emit``)."""
        self.buffer.append(event)
        self.wanted.clear()
        self.ready.set()

    async def pace(self) -> None:
        """Called by the run at its check points."""
        await self.wanted.wait()

    def finish(self, error: BaseException | None = None) -> None:
        """The run ended (``error``: it raised)."""
        self.finished = True
        self.error = error
        self.ready.set()

    async def next(self) -> Any:
        """The next event, or the end marker; raises the run's error."""
        while not self.buffer:
            if self.finished:
                if self.error is not None:
                    raise self.error
                return _END
            self.ready.clear()
            self.wanted.set()
            await self.ready.wait()
        return self.buffer.popleft()


class _Events:
    """What ``async for`` iterates. An async generator left by ``break`` is closed only when
    the loop gets round to finalizing it; the run would wait meanwhile and the next request
    on the session would meet it. This one cancels the run as soon as it is dropped (the
    generator's own close then awaits the unwinding)."""

    __slots__ = ("_gen", "_stream")

    def __init__(self, stream: EventStream) -> None:
        self._stream = stream
        self._gen = stream._aiter()

    def __aiter__(self) -> _Events:
        return self

    def __anext__(self) -> Any:
        return self._gen.__anext__()

    async def aclose(self) -> None:
        await self._gen.aclose()

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
    """An event stream over one request, pulled by its reader: ``async for`` or plain ``for``.

    Stopping early (``aclose()``, ``dispose()``, breaking, cancelling, dropping it) cancels
    the run where it stands: no RunEnd is emitted and the session stays resumable (R26,
    R41). An unhandled error is raised from the iteration."""

    def __init__(self, runner: Runner, session: AgentSession, prompt: str | None) -> None:
        self._runner = runner
        self._session = session
        self._prompt = prompt
        self._task: asyncio.Task[Any] | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._agen: Any = None
        self._lock = threading.Lock()
        self._reading = False
        self._closed = False
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self._reader: threading.Thread | None = None
        self._unwound = threading.Event()
        self._closer: threading.Thread | None = None
        self.response: AgentResponse | None = None
        """The response, once the stream completed."""

    # -- async ------------------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[Event]:
        return _Events(self)

    async def _aiter(self) -> AsyncGenerator[Event, None]:
        import asyncio

        channel = Channel()

        async def run() -> None:
            try:
                self.response = await self._runner(
                    self._session, self._prompt, channel.put, channel.pace
                )
            except asyncio.CancelledError:
                channel.finish()
                raise
            except BaseException as exc:
                channel.finish(exc)
                raise
            channel.finish()

        try:
            while True:
                if self._task is None:  # the run starts when the first event is asked for
                    self._task = asyncio.ensure_future(run())
                event = await channel.next()
                if event is _END:
                    return
                yield event
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Cancel the run if it is still going and wait until it has unwound (a tool that
        had started finishes first and is recorded); no RunEnd, session resumable."""
        import asyncio

        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
        while not task.done():
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:
                continue  # our own caller is cancelled too: still let the run unwind
        if not task.cancelled():
            task.exception()  # retrieved: an error was raised from the iteration

    # -- sync -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Event]:
        if IN_BROWSER:
            yield from self._iter_here()
            return
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop runs here (a server's worker, a script): run it here
            yield from self._iter_own_loop()
            return
        loop = asyncio.new_event_loop()
        # the run lives on its own loop in a worker thread (a notebook cell already runs a
        # loop on this one); each event is handed over when this thread asks for it
        thread = threading.Thread(target=loop.run_forever, name="intermission-stream", daemon=True)
        self._thread_loop, self._thread = loop, thread
        thread.start()
        agen = self._agen = self._aiter()
        try:
            while True:
                with self._lock:
                    self._reading = True
                try:
                    event = asyncio.run_coroutine_threadsafe(agen.__anext__(), loop).result()
                except StopAsyncIteration:
                    return
                finally:
                    with self._lock:
                        self._reading = False
                yield event
        finally:
            self._stop_thread(reader=True)

    def _iter_own_loop(self) -> Iterator[Event]:
        # The run lives on a loop of its own that this thread runs only while it waits for
        # the next event: pulled as strictly as on a worker thread, without a thread per
        # request and a hand-over per event (which cost more than a decision's commits).
        # Whoever sets ``_closed`` (under the lock, while nobody reads) is the one closer;
        # the reader enters the loop only under the same lock while it is not set.
        import asyncio

        loop = self._own_loop = asyncio.new_event_loop()
        agen = self._agen = self._aiter()
        try:
            while True:
                with self._lock:
                    if self._closed:  # disposed between two events
                        return
                    self._reading = True
                    # (the thread inside the loop now: a generator may move between threads)
                    self._reader = threading.current_thread()
                try:
                    event = loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
                finally:
                    with self._lock:
                        self._reading = False
                yield event
        finally:
            with self._lock:
                mine = not self._closed
                self._closed = True
            if mine:
                self._unwind_own_loop()
            elif threading.current_thread() is not self._closer:
                self._unwound.wait()  # another thread closes it: return once it has

    def _unwind_own_loop(self) -> None:
        """Cancel the run, let it unwind and close its loop (by the one closer, the loop
        idle). Where a loop already runs in this thread (the stream dropped inside async
        code), the closing runs on a short-lived thread of its own."""
        import asyncio

        self._closer = threading.current_thread()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._unwind_here()
            return
        helper = threading.Thread(target=self._unwind_here, name="intermission-stream-close")
        helper.start()
        helper.join()

    def _unwind_here(self) -> None:
        loop = self._own_loop
        assert loop is not None
        try:
            loop.run_until_complete(self.aclose())
            if self._agen is not None:
                loop.run_until_complete(self._agen.aclose())
            loop.run_until_complete(wind_down())
        finally:
            try:
                loop.close()
            finally:
                self._unwound.set()

    def _dispose_own_loop(self) -> None:
        loop = self._own_loop
        assert loop is not None
        here = threading.current_thread()
        with self._lock:
            closer = not self._closed and not self._reading
            reading = not self._closed and self._reading
            reader = self._reader
            if closer:
                self._closed = True
        if closer:  # between two events (or over): close it from here
            self._unwind_own_loop()
            return
        if not reading:  # closed, or being closed by another thread
            if here is not self._closer:
                self._unwound.wait()
            return
        if here is reader:  # from inside the run itself
            self._cancel_run()
            return
        # the reader is waiting for an event: the run is cancelled on its loop and the
        # reader, seeing the end, closes; if the reader got an event first and is busy with
        # it, this thread closes instead (the reader cannot enter the loop again)
        try:
            loop.call_soon_threadsafe(self._cancel_run)
        except RuntimeError:  # (closed meanwhile)
            pass
        while not self._unwound.wait(0.01):
            with self._lock:
                closer = not self._closed and not self._reading
                if closer:
                    self._closed = True
            if closer:
                self._unwind_own_loop()
                return

    def _cancel_run(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()

    def _iter_here(self) -> Iterator[Event]:
        # No threads in a browser: each event is awaited on Pyodide's own loop, this frame
        # suspended meanwhile (JSPI), and the run goes on there between two events.
        agen = self._agen = self._aiter()

        async def step() -> Event:
            return await agen.__anext__()

        try:
            while True:
                try:
                    event = run_sync(step())
                except StopAsyncIteration:
                    return
                yield event
        finally:
            run_sync(agen.aclose())

    def _stop_thread(self, *, reader: bool = False) -> None:
        loop, thread = self._thread_loop, self._thread
        if loop is None or thread is None or thread is threading.current_thread():
            return
        with self._lock:
            if self._closed or loop.is_closed():
                return
        import asyncio

        # cancel the run and wait until it has unwound (the request has left the session)
        asyncio.run_coroutine_threadsafe(self.aclose(), loop).result()
        with self._lock:
            if self._closed or (self._reading and not reader):
                return  # the reader, waiting for an event, sees the end and closes
            self._closed = True
        if self._agen is not None:
            asyncio.run_coroutine_threadsafe(self._agen.aclose(), loop).result()
        asyncio.run_coroutine_threadsafe(wind_down(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def dispose(self) -> None:
        """Sync twin of :meth:`aclose` (the seed's ``Disposable.dispose()``): cancel the run
        and return once it has unwound, so the session is ready for the next request."""
        if IN_BROWSER:
            run_sync(self.aclose())
            return
        if self._own_loop is not None:
            self._dispose_own_loop()
            return
        self._stop_thread()

    def collect(self) -> list[Event]:
        """Consume the whole stream synchronously and return its events."""
        return list(self)
