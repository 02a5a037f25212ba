"""A graceful stop (issue 27, case 3): ``serve`` under SIGTERM, raw HTTP, SQLite and a real
PostgreSQL.

A client resumes an approved slow tool and disconnects; half a second later the server
gets SIGTERM. It stops accepting connections at once, waits for the run — the tool
completes, the thread is saved and its claim released — and then exits, within the drain.
A run longer than the drain: the server exits when the drain ends, says so in its log, and
releases the run's claim, so another server can take the thread at once (no THREAD_BUSY
for a lease) and finds the tool's effect started — an unknown outcome, never run twice.
In process: once a stop began, a new run is answered 503 ``SERVER_STOPPING``."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

import httpx  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402
from intermission.stores.open import open_store  # noqa: E402

from . import agents  # noqa: E402
from ._server import Server, effects, parse_sse  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "s.db")
        return
    from tests._helpers import fresh_pg

    dsn = pg_dsn()
    fresh_pg().close()
    yield dsn


def _wait_for(check: Any, what: str, timeout: float = 120) -> None:
    until = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < until, f"{what} did not happen"
        time.sleep(0.02)


def _refused(server: Server) -> bool:
    try:
        httpx.get(server.url + "/interrupts", timeout=2)
    except httpx.TransportError:
        return True
    return False


def _resume_and_leave(server: Server, thread: str, log: Path) -> None:
    """Pause the slow agent, approve, and disconnect while its tool runs."""
    go = [{"id": "u1", "role": "user", "content": "go"}]
    paused = server.run("slow", {"threadId": thread, "runId": "r1", "messages": go})
    (interrupt,) = paused[-1][1]["outcome"]["interrupts"]
    body = {"threadId": thread, "runId": "r2", "messages": [], "state": {}, "tools": [],
            "context": [], "forwardedProps": {}, "resume": [{"interruptId": interrupt["id"],
            "status": "resolved", "payload": {"approved": True}}]}  # fmt: skip
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{server.url}/agents/slow", json=body) as r:
            assert r.status_code == 200
            _wait_for(log.with_name(f"entered-{thread}").exists, "the tool's start")
    # the client is gone; the tool goes on


def _stored(target: str, thread: str) -> tuple[str, str | None, dict[str, str]]:
    store = open_store(target)
    try:
        session = store.load(thread)
        ledger = {k: e.status for k, e in session.ledger.items()}
        return session.status, store._holder(thread), ledger  # type: ignore[attr-defined]
    finally:
        store.close()


def test_sigterm_lets_a_run_whose_client_left_finish_and_save(target: str, tmp_path: Path) -> None:
    log = tmp_path / "effects.log"
    server = Server(target, log, extra=("--drain", "60"))
    thread = "t-" + uuid.uuid4().hex[:8]
    try:
        _resume_and_leave(server, thread, log)
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGTERM)
        _wait_for(lambda: _refused(server), "refusing new connections")
        with pytest.raises(subprocess.TimeoutExpired):  # draining: the tool waits at its gate
            server.proc.wait(timeout=2)
        log.with_name(f"gate-{thread}").touch()
        server.proc.wait(timeout=60)  # within the drain
    finally:
        log.with_name(f"gate-{thread}").touch()
        server.stop()
    assert effects(log, thread) == ["slow_step"]
    status, holder, ledger = _stored(target, thread)
    assert status == "done" and holder is None
    assert list(ledger.values()) == ["completed"]
    assert "did not finish" not in server.output.read_text()


def test_a_run_longer_than_the_drain_is_logged_and_its_claim_released(
    target: str, tmp_path: Path
) -> None:
    log = tmp_path / "effects.log"
    server = Server(target, log, extra=("--drain", "1"))
    thread = "t-" + uuid.uuid4().hex[:8]
    try:
        _resume_and_leave(server, thread, log)
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)  # the drain ends; the tool never got through its gate
    finally:
        server.stop()
    said = server.output.read_text()
    assert f"of thread '{thread}' (claim released" in said and "1 s drain" in said, said
    _, holder, ledger = _stored(target, thread)
    assert holder is None and list(ledger.values()) == ["started"]
    # the next server takes the thread at once: the effect's outcome is unknown, not re-run
    other = Server(target, log)
    try:
        store_view = other.get(f"/threads/{thread}")
        assert store_view["interrupts"] == []
        retry = other.run("slow", {"threadId": thread, "runId": "r3", "messages": []})
        assert retry[-1][1]["type"] == "RUN_ERROR"
        assert retry[-1][1]["code"] == "EffectOutcomeUnknownError", retry[-1][1]
    finally:
        log.with_name(f"gate-{thread}").touch()
        other.stop()
    assert effects(log, thread) == []


def test_a_second_interrupt_ends_the_drain_at_once(tmp_path: Path) -> None:
    """The README: "A second ^C exits at once". Before, a drain whose run's client had left
    (uvicorn had no connection to wait for, so the drain ran in the lifespan's shutdown)
    went on for the whole ``--drain`` whatever the second ^C said, and a ^C ended
    ``serve`` with a KeyboardInterrupt traceback."""
    log = tmp_path / "effects.log"
    target = str(tmp_path / "s.db")
    server = Server(target, log, extra=("--drain", "300"))
    thread = "t-" + uuid.uuid4().hex[:8]
    try:
        _resume_and_leave(server, thread, log)
        server.proc.send_signal(signal.SIGINT)
        _wait_for(lambda: _refused(server), "refusing new connections")
        with pytest.raises(subprocess.TimeoutExpired):  # draining: the tool waits at its gate
            server.proc.wait(timeout=1)
        server.proc.send_signal(signal.SIGINT)
        server.proc.wait(timeout=60)  # (not the 300 s drain)
    finally:
        log.with_name(f"gate-{thread}").touch()
        server.stop()
    said = server.output.read_text()
    assert f"of thread '{thread}' (claim released" in said, said
    assert "second interrupt" in said and "Traceback" not in said, said
    assert server.proc.returncode == 130
    _, holder, ledger = _stored(target, thread)
    assert holder is None and list(ledger.values()) == ["started"]


def test_a_stopping_app_answers_new_runs_503_and_drains_on_lifespan_shutdown() -> None:
    from intermission.agui import AGUIApp

    store = MemoryStore()
    app = agui_app(agents.AGENTS, store, drain_s=5)
    assert isinstance(app, AGUIApp) and app.drain_s == 5
    body = {"threadId": "S", "runId": "r1", "messages": [
        {"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert parse_sse(client.post("/agents/ops", json=body).text)[-1][1]["type"] == (
            "RUN_FINISHED"
        )
        app.stop()
        assert app.stopping
        refused = client.post("/agents/ops", json={**body, "threadId": "S2"})
        assert refused.status_code == 503 and "SERVER_STOPPING" in refused.json()["error"]
        assert refused.headers["retry-after"]
        assert client.get("/interrupts").status_code == 200  # reads still answer
    # the lifespan's shutdown ran the drain: nothing was in flight, nothing to release
    assert app.drain() == []
