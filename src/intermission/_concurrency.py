"""The one place that decides how work runs beside the caller: threads on CPython, the
event loop in a browser (Pyodide has no threads and no processes).

Three things the package needs, each behind one function:

- ``run_sync(coro)``: run a coroutine to completion from sync code (every ``.call()``).
- ``background(fn)``: start ``fn()`` beside the caller and let it wait (a widget's click).
- ``every(seconds, fn)``: call ``fn()`` periodically until stopped (lease renewal, polling).

The backend is chosen once, at import, from ``sys.platform``: ``Threads`` everywhere but
``emscripten``, where ``EventLoop`` blocks with ``pyodide.ffi.run_sync`` (JSPI stack
switching) and runs background work and tickers as asyncio tasks on Pyodide's WebLoop.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .errors import UsageError

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["BACKEND", "IN_BROWSER", "Backend", "EventLoop", "Job", "Threads", "Ticker",
           "background", "every", "run_sync", "wind_down"]  # fmt: skip

T = TypeVar("T")

IN_BROWSER = sys.platform == "emscripten"
"""True under Pyodide (JupyterLite): no threads, no subprocesses."""


class Job(Protocol):
    """Work started by ``background``."""

    @property
    def done(self) -> bool:
        """True once the work has returned or raised."""
        ...

    @property
    def error(self) -> BaseException | None:
        """What the work raised (it never escapes anywhere else)."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the work is done (at most ``timeout`` s); True when it is. Returns at
        once from inside the work itself, and where nothing may block (a browser's button
        handler)."""
        ...


class Ticker(Protocol):
    """A periodic call started by ``every``."""

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop calling; waits (at most ``timeout`` s) for a call in progress to end."""
        ...


class Backend(Protocol):
    """How ``run_sync``, ``background`` and ``every`` are carried out."""

    name: str

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T: ...

    def background(self, fn: Callable[[], object], name: str) -> Job: ...

    def every(self, seconds: float, fn: Callable[[], object], name: str) -> Ticker: ...


# -- CPython: threads ----------------------------------------------------------------------
class _ThreadJob:
    def __init__(self, fn: Callable[[], object], name: str) -> None:
        self.error: BaseException | None = None
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._fn()
        except BaseException as exc:  # kept for wait()'s caller, not printed by the thread
            self.error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return self.done


class _ThreadTicker:
    def __init__(self, seconds: float, fn: Callable[[], object], name: str) -> None:
        self._stop = threading.Event()
        self._seconds = seconds
        self._fn = fn
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._seconds):
            if self._fn() is False:
                return

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


class Threads:
    """CPython: a worker thread per job or ticker; ``run_sync`` on this thread's own loop,
    or on a worker's loop when this thread already runs one (a notebook cell)."""

    name = "threads"

    def __init__(self) -> None:
        self._local = threading.local()
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None
        self._worker_lock = threading.Lock()
        self._loops: list[asyncio.AbstractEventLoop] = []

    def _thread_loop(self) -> asyncio.AbstractEventLoop:
        # One long-lived loop per long-lived thread: asyncio.run() would build and tear down
        # a loop per call, which costs more than a whole 100-node graph run.
        import asyncio

        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            self._local.loop = loop
            with self._worker_lock:
                if not self._loops:
                    import atexit

                    atexit.register(self._close_loops)
                self._loops.append(loop)
        return loop

    def _close_loops(self) -> None:
        # At exit (the worker threads are joined by then): a cached loop left open is a
        # ResourceWarning under `python -X dev`, with its self-pipe sockets.
        with self._worker_lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running() and not loop.is_closed():
                try:
                    loop.run_until_complete(wind_down())
                finally:
                    loop.close()

    @staticmethod
    def _keeps_loop() -> bool:
        # Only threads that live as long as the process keep a cached loop; a loop cached in
        # a short-lived user thread would be left unclosed when that thread ends.
        thread = threading.current_thread()
        return thread is threading.main_thread() or thread.name.startswith("intermission-sync")

    @staticmethod
    def _run_fresh(coro: Coroutine[Any, Any, T]) -> T:
        import asyncio

        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _run_on_worker(self, coro: Coroutine[Any, Any, T]) -> T:
        import concurrent.futures

        with self._worker_lock:
            if self._worker is None:
                self._worker = concurrent.futures.ThreadPoolExecutor(
                    max_workers=4, thread_name_prefix="intermission-sync"
                )
        return self._worker.submit(lambda: self._thread_loop().run_until_complete(coro)).result()

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        import asyncio  # lazy: `import intermission` should not pay for asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._keeps_loop():
                return self._thread_loop().run_until_complete(coro)
            return self._run_fresh(coro)
        # run_until_complete cannot nest, and nest_asyncio-style patching would change the
        # user's loop behind their back: a worker thread with its own loop runs it instead
        return self._run_on_worker(coro)

    def background(self, fn: Callable[[], object], name: str) -> Job:
        return _ThreadJob(fn, name)

    def every(self, seconds: float, fn: Callable[[], object], name: str) -> Ticker:
        return _ThreadTicker(seconds, fn, name)


async def wind_down() -> None:
    """What ``asyncio.run`` does before it closes its loop, for a loop kept open here (a
    thread's cached loop, a stream's): run the close tasks the garbage collector scheduled
    for async generators left unfinished (an HTTP client's body iterators, when a stream is
    abandoned), cancel whatever else is left, close the generators still open. A loop
    closed without it prints "Task was destroyed but it is pending!" at exit."""
    import asyncio

    loop = asyncio.get_running_loop()
    here = asyncio.current_task()
    for _ in range(_SETTLE_TURNS):  # (a close task needs a few turns, never a wait)
        left = [task for task in asyncio.all_tasks(loop) if task is not here]
        if not left:
            break
        await asyncio.sleep(0)
    else:
        for task in left:
            task.cancel()
        await asyncio.wait(left, timeout=1.0)
        for task in left:
            if task.done() and not task.cancelled():
                task.exception()  # (retrieved: never "exception was never retrieved")
    await loop.shutdown_asyncgens()


_SETTLE_TURNS = 20


# -- Pyodide: the event loop ---------------------------------------------------------------
async def _outcome(awaitable: Awaitable[T]) -> tuple[bool, Any]:
    # Never raise into the WebLoop's task: Pyodide reports a task's exception as an error
    # output of the cell, even when the caller catches the re-raised one below.
    try:
        return True, await awaitable
    except BaseException as exc:
        return False, exc


class _TaskJob:
    def __init__(self, backend: EventLoop, fn: Callable[[], object], name: str) -> None:
        import asyncio

        self.error: BaseException | None = None
        self._backend = backend
        self._fn = fn
        self._task = asyncio.ensure_future(self._run())
        self._task.set_name(name)

    async def _run(self) -> None:
        try:
            self._fn()  # inside a task JSPI can suspend, so fn's own run_sync may block
        except BaseException as exc:
            self.error = exc

    @property
    def done(self) -> bool:
        return self._task.done()

    def wait(self, timeout: float | None = None) -> bool:
        import asyncio

        if self._task.done():
            return True
        try:
            here = asyncio.current_task() is self._task
        except RuntimeError:
            here = False
        if here or not self._backend.can_block():
            return False
        self._backend.run_sync(asyncio.wait({self._task}, timeout=timeout))
        return self._task.done()


class _TaskTicker:
    def __init__(self, seconds: float, fn: Callable[[], object], name: str) -> None:
        import asyncio

        self._seconds = seconds
        self._fn = fn
        self._stopped = False
        self._task = asyncio.ensure_future(self._loop())
        self._task.set_name(name)

    async def _loop(self) -> None:
        import asyncio

        try:
            while True:
                await asyncio.sleep(self._seconds)
                if self._stopped or self._fn() is False:
                    return
        except BaseException:  # as a dying thread would: stop, and never become an error output
            return

    def stop(self, timeout: float | None = 5.0) -> None:
        # One thread of execution: no call can be in progress while this line runs.
        self._stopped = True
        self._task.cancel()


class EventLoop:
    """Pyodide: ``run_sync`` blocks through JSPI (``pyodide.ffi.run_sync``), which works in
    a cell and inside an asyncio task but not in a widget's ``on_click`` handler; jobs and
    tickers are asyncio tasks. ``run_sync``/``can_run_sync`` are injectable for tests."""

    name = "event-loop"

    def __init__(
        self,
        run_sync: Callable[[Awaitable[Any]], Any] | None = None,
        can_run_sync: Callable[[], bool] | None = None,
    ) -> None:
        self._run_sync = run_sync
        self._can_run_sync = can_run_sync

    def _ffi(self) -> tuple[Callable[[Awaitable[Any]], Any], Callable[[], bool]]:
        if self._run_sync is None or self._can_run_sync is None:
            from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]

            self._run_sync, self._can_run_sync = run_sync, can_run_sync
        return self._run_sync, self._can_run_sync

    def can_block(self) -> bool:
        """True where ``run_sync`` may suspend (a cell, an asyncio task)."""
        return bool(self._ffi()[1]())

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        block, can = self._ffi()
        if not can():
            coro.close()  # never awaited: no "coroutine was never awaited" warning later
            raise UsageError(
                "cannot wait for a run here: in the browser a widget's button handler may "
                "not block; start the work with intermission's background() or await it"
            )
        ok, value = block(_outcome(coro))
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def background(self, fn: Callable[[], object], name: str) -> Job:
        return _TaskJob(self, fn, name)

    def every(self, seconds: float, fn: Callable[[], object], name: str) -> Ticker:
        return _TaskTicker(seconds, fn, name)


BACKEND: Backend = EventLoop() if IN_BROWSER else Threads()
"""The backend of this process, chosen once."""


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, also inside a running loop (a
    notebook cell): on a worker thread on CPython, through JSPI in the browser. An
    exception is raised here only, once."""
    return BACKEND.run_sync(coro)


def background(fn: Callable[[], object], *, name: str = "intermission-job") -> Job:
    """Start ``fn()`` beside the caller (a thread, or an asyncio task in the browser). What
    it raises is kept in ``job.error``."""
    return BACKEND.background(fn, name)


def every(seconds: float, fn: Callable[[], object], *, name: str = "intermission-ticker") -> Ticker:
    """Call ``fn()`` every ``seconds`` until ``stop()``, or until ``fn`` returns False or
    raises."""
    return BACKEND.every(seconds, fn, name)
