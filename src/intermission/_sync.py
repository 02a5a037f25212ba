"""Run the async core from sync code, also inside an already-running loop (a Jupyter cell)."""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["run_sync"]

T = TypeVar("T")

_local = threading.local()
_worker: concurrent.futures.ThreadPoolExecutor | None = None
_worker_lock = threading.Lock()


def _thread_loop() -> asyncio.AbstractEventLoop:
    # One long-lived loop per long-lived thread: asyncio.run() would build and tear down
    # a loop per call, which costs more than a whole 100-node graph run.
    import asyncio

    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


def _keeps_loop() -> bool:
    # Only threads that live as long as the process keep a cached loop; a loop cached in a
    # short-lived user thread would be left unclosed when that thread ends.
    thread = threading.current_thread()
    return thread is threading.main_thread() or thread.name.startswith("intermission-sync")


def _run_fresh(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _run_on_worker(coro: Coroutine[Any, Any, T]) -> T:
    import concurrent.futures

    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = concurrent.futures.ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="intermission-sync"
            )
    return _worker.submit(lambda: _thread_loop().run_until_complete(coro)).result()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code.

    Outside an event loop it runs on this thread's private loop. Inside a running loop
    (a notebook cell) it runs on a worker thread with its own loop and this thread waits:
    ``loop.run_until_complete`` cannot nest, and ``nest_asyncio``-style patching would
    change the user's loop behind their back.
    """
    import asyncio  # lazy: `import intermission` should not pay for asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if _keeps_loop():
            return _thread_loop().run_until_complete(coro)
        return _run_fresh(coro)
    return _run_on_worker(coro)
