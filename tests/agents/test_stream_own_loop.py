"""A stream read where no loop runs lives on a loop of its own in the reader's thread.
``dispose()`` from another thread — while the reader waits for an event, while it is busy
with one, or racing it — returns once the run has unwound, leaves the loop closed and the
run done, and never waits for a reader that does not come back. A stream dropped inside
async code is closed without running its loop in a loop."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from typing import Any

from intermission.agents.stream import EventStream

WAIT = 30.0  # a bound for joins, never a measurement


def _runner(events: int, slow_at: int | None = None, slow_s: float = 0.0) -> Any:
    async def run(session: Any, prompt: Any, sink: Callable[[Any], None], pacer: Any) -> str:
        for i in range(events):
            if i == slow_at:
                await asyncio.sleep(slow_s)
            sink(f"e{i}")
            await pacer()
        return "done"

    return run


def _unwound(stream: EventStream) -> None:
    assert stream._own_loop is not None and stream._own_loop.is_closed()
    assert stream._task is None or stream._task.done()
    again = threading.Thread(target=stream.dispose, daemon=True)
    again.start()
    again.join(WAIT)
    assert not again.is_alive(), "a second dispose() returns at once"


def test_dispose_while_the_reader_waits_for_an_event() -> None:
    stream = EventStream(_runner(4, slow_at=1, slow_s=60), None, None)  # type: ignore[arg-type]
    events = iter(stream)
    assert next(events) == "e0"
    rest: list[Any] = []
    reading = threading.Thread(target=lambda: rest.extend(events))
    reading.start()
    while not stream._reading:  # the reader is inside the loop, waiting for e1
        threading.Event().wait(0.001)
    stream.dispose()
    reading.join(WAIT)
    assert not reading.is_alive() and rest == []  # the run was cancelled where it stood
    _unwound(stream)


def test_dispose_does_not_wait_for_a_reader_busy_with_an_event() -> None:
    stream = EventStream(_runner(3), None, None)  # type: ignore[arg-type]
    events = iter(stream)
    assert next(events) == "e0"
    disposed = threading.Event()
    closer = threading.Thread(target=lambda: (stream.dispose(), disposed.set()))
    closer.start()
    # the reader holds its event and waits for the dispose: one that waited for the
    # reader to come back would never return
    assert disposed.wait(WAIT)
    closer.join(WAIT)
    assert list(events) == []  # nothing more after the dispose
    _unwound(stream)


def test_dispose_racing_the_reader_always_unwinds() -> None:
    rng = random.Random(42)
    for _ in range(40):
        stream = EventStream(_runner(6), None, None)  # type: ignore[arg-type]
        seen: list[Any] = []
        errors: list[BaseException] = []

        def read(
            stream: EventStream = stream, seen: list[Any] = seen, errors: list[Any] = errors
        ) -> None:
            try:
                for event in stream:
                    seen.append(event)
                    threading.Event().wait(rng.random() / 2000)
            except BaseException as exc:  # (reported below)
                errors.append(exc)

        def dispose(stream: EventStream = stream, errors: list[Any] = errors) -> None:
            try:
                threading.Event().wait(rng.random() / 500)
                stream.dispose()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=read), threading.Thread(target=dispose)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert not any(t.is_alive() for t in threads), "reader and dispose both return"
        assert errors == []
        assert seen == [f"e{i}" for i in range(len(seen))]  # a prefix, in order
        if stream._own_loop is not None:  # (disposed before the reader started: no loop)
            _unwound(stream)


def test_a_stream_dropped_inside_async_code_is_closed() -> None:
    stream = EventStream(_runner(3), None, None)  # type: ignore[arg-type]
    events = iter(stream)
    assert next(events) == "e0"

    async def drop() -> None:
        events.close()  # (a loop runs in this thread now)

    asyncio.run(drop())
    _unwound(stream)
