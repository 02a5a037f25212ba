"""The concurrency seam (issue 23): one backend chosen at import; threads on CPython, the
event loop under Pyodide. The Pyodide backend runs for real in
tests/browser/test_tutorials_in_lite.py; here its logic runs on CPython with
``pyodide.ffi``'s two functions stood in for."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from intermission import UsageError
from intermission import _concurrency as c


def drive(awaitable: Awaitable[Any]) -> Any:
    """Run an awaitable that never suspends on a loop, the way JSPI hands back its result:
    what it raises escapes from here."""
    coro = awaitable.__await__()
    try:
        while True:
            coro.send(None)
    except StopIteration as stop:
        return stop.value


class Blocker:
    """A stand-in for ``pyodide.ffi.run_sync``: records what it was handed and what
    driving it raised (nothing may: Pyodide would show it as an error output)."""

    def __init__(self) -> None:
        self.escaped: list[BaseException] = []

    def __call__(self, awaitable: Awaitable[Any]) -> Any:
        try:
            return drive(awaitable)
        except BaseException as exc:
            self.escaped.append(exc)
            raise


async def value(x: Any) -> Any:
    return x


async def fails(exc: BaseException) -> Any:
    raise exc


def test_the_backend_is_chosen_once_from_the_platform() -> None:
    assert sys.platform != "emscripten" and not c.IN_BROWSER
    assert isinstance(c.BACKEND, c.Threads) and c.BACKEND.name == "threads"


@given(st.one_of(st.integers(), st.text(), st.none(), st.lists(st.integers())))
def test_event_loop_run_sync_returns_what_the_coroutine_returns(x: Any) -> None:
    blocker = Blocker()
    assert c.EventLoop(blocker, lambda: True).run_sync(value(x)) == x
    assert blocker.escaped == []


@given(st.sampled_from([ValueError("v"), KeyError("k"), UsageError("u"), KeyboardInterrupt()]))
def test_event_loop_run_sync_raises_only_to_the_caller(exc: BaseException) -> None:
    # The bug: the exception went through the WebLoop's task too, so a caught one still
    # showed as a red traceback (02's `except NothingToResumeError`).
    blocker = Blocker()
    with pytest.raises(type(exc)) as raised:
        c.EventLoop(blocker, lambda: True).run_sync(fails(exc))
    assert raised.value is exc
    assert blocker.escaped == []


def test_event_loop_run_sync_where_nothing_may_block_is_a_usage_error() -> None:
    coro = value(1)
    with pytest.raises(UsageError, match="button handler may not block"):
        c.EventLoop(Blocker(), lambda: False).run_sync(coro)
    assert coro.cr_frame is None  # closed: no "never awaited" warning later


def test_event_loop_background_runs_as_a_task_and_keeps_its_error() -> None:
    backend = c.EventLoop(Blocker(), lambda: False)  # a button handler: cannot block
    ran: list[str] = []

    async def main() -> None:
        ok = backend.background(lambda: ran.append("ok"), "job-ok")
        bad = backend.background(lambda: 1 / 0, "job-bad")
        assert not ok.done and not ok.wait(1.0)  # started, not run yet; wait may not block
        await asyncio.sleep(0)
        assert ok.done and ok.error is None and ok.wait()
        assert bad.done and isinstance(bad.error, ZeroDivisionError)

    asyncio.run(main())
    assert ran == ["ok"]
    assert not any(t.name.startswith("job-") for t in threading.enumerate())


def test_event_loop_ticker_ticks_until_stopped_and_dies_quietly() -> None:
    backend = c.EventLoop(Blocker(), lambda: True)
    ticks: list[int] = []

    def boom() -> None:
        raise RuntimeError("the store is gone")

    async def main() -> None:
        ticker = backend.every(0.001, lambda: ticks.append(1), "tick")
        failing = backend.every(0.001, boom, "boom")
        while len(ticks) < 3:
            await asyncio.sleep(0.001)
        ticker.stop()
        stopped_at = len(ticks)
        await asyncio.sleep(0.01)
        assert len(ticks) == stopped_at
        failing.stop()

    asyncio.run(main())  # no "Task exception was never retrieved", no error escaped


def test_threads_background_and_ticker() -> None:
    job = c.Threads().background(lambda: 1 / 0, "intermission-test-job")
    assert job.wait(10) and isinstance(job.error, ZeroDivisionError)
    done = threading.Event()
    count = [0]

    def tick() -> None:
        count[0] += 1
        if count[0] == 3:
            done.set()

    ticker = c.every(0.001, tick, name="intermission-test-ticker")
    assert done.wait(10)
    ticker.stop()
    stopped_at = count[0]
    assert not any(t.name == "intermission-test-ticker" for t in threading.enumerate())
    assert count[0] == stopped_at


def test_threads_run_sync_inside_a_running_loop_uses_a_worker() -> None:
    async def where() -> str:
        return threading.current_thread().name

    async def cell() -> str:
        return c.run_sync(where())

    assert c.run_sync(where()) == threading.current_thread().name
    assert asyncio.run(cell()).startswith("intermission-sync")


class Recording:
    """The process's backend, recording each use: who goes through the seam."""

    name = "recording"

    def __init__(self, inner: c.Backend) -> None:
        self.inner = inner
        self.used: list[str] = []

    def run_sync(self, coro: Coroutine[Any, Any, Any]) -> Any:
        self.used.append("run_sync")
        return self.inner.run_sync(coro)

    def background(self, fn: Any, name: str) -> c.Job:
        self.used.append(name)
        return self.inner.background(fn, name)

    def every(self, seconds: float, fn: Any, name: str) -> c.Ticker:
        self.used.append(name)
        return self.inner.every(seconds, fn, name)


def test_every_thread_the_package_starts_goes_through_the_seam(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from intermission import InMemoryAgentSession
    from intermission.examples import build_change_graph
    from intermission.notebook import ApprovalWidget, Inbox, settings
    from intermission.stores import SQLiteStore

    rec = Recording(c.BACKEND)
    monkeypatch.setattr(c, "BACKEND", rec)
    started = threading.Thread.start

    def only_ours(self: threading.Thread) -> None:  # a thread started past the seam fails
        assert self.name.startswith(("intermission-sync", "intermission-test")) or any(
            self.name == n for n in rec.used
        ), f"thread {self.name!r} started outside _concurrency"
        started(self)

    monkeypatch.setattr(threading.Thread, "start", only_ours)
    monkeypatch.setattr(settings, "autopilot", False)
    team = build_change_graph()
    session = InMemoryAgentSession.of("change-001")
    team.prompt("Upgrade the order service").session(session).call()
    store = SQLiteStore(tmp_path / "s.sqlite", lease_ms=30)
    store.save(session)
    runner = ApprovalWidget(team, store.load("change-001"), store=store).runner
    runner.run_in_background(lambda s: s.context.put("approval.decision", "x"))
    runner.wait()
    inbox = Inbox(store, {"change": team}, poll_s=0.01)
    inbox.close()
    store.close()
    assert {"run_sync", "intermission-widget", "intermission-lease", "intermission-inbox"} <= set(
        rec.used
    )


def test_a_program_that_ran_a_request_exits_without_resource_warnings(tmp_path: Any) -> None:
    # The main thread keeps one event loop for every .call(); left open at exit it was a
    # ResourceWarning (and two for its self-pipe sockets) under `python -X dev`.
    import subprocess

    program = (
        "import sys\n"
        "from intermission import InMemoryAgentSession\n"
        "from intermission.examples import build_ops_agent\n"
        "from intermission.stores import SQLiteStore\n"
        "store = SQLiteStore(sys.argv[1])\n"
        "s = InMemoryAgentSession.of('s-1')\n"
        "build_ops_agent().prompt('Please delete user 1001').session(s).call()\n"
        "store.save(s)\n"
        "store.close()\n"
        "print(s.status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", program, str(tmp_path / "s.sqlite")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pending"
    assert "Warning" not in done.stderr, done.stderr
