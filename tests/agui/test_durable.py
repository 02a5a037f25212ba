"""Interrupts that survive the server: SIGKILL between pause and resume, and four
concurrent resumes through two servers on one store (SQLite, real PostgreSQL): one
effect, and every client gets the same outcome (issue 22)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from ._server import Server, effects, types  # noqa: E402


def _pause(server: Server, thread: str) -> str:
    events = server.run(
        "ops",
        {"threadId": thread, "runId": "r1",
         "messages": [{"id": "u", "role": "user", "content": "go"}]},
    )  # fmt: skip
    outcome = events[-1][1]["outcome"]
    assert outcome["type"] == "interrupt"
    return str(outcome["interrupts"][0]["id"])


def test_a_sigkilled_server_loses_nothing_a_fresh_one_resumes(tmp_path: Path) -> None:
    store, log = str(tmp_path / "s.db"), tmp_path / "e.log"
    first = Server(store, log)
    thread = "t-" + uuid.uuid4().hex[:8]
    try:
        out = first.js(thread, [{"runId": "r1", "user": "delete"}])
        (iid,) = out["steps"][0]["pending"]
    finally:
        first.kill()  # SIGKILL: no shutdown, no save
    second = Server(store, log)
    try:
        listed = second.get("/interrupts")["interrupts"]
        assert [x["interrupt"]["id"] for x in listed] == [iid]
        # the client resumes the interrupt it saw, on a server that never saw it
        resume = [{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]
        again = second.js(thread, [{"runId": "r2", "resume": resume}])
        step = again["steps"][0]
        assert step["error"] is None and step["outcome"] == "success"
        assert "TOOL_CALL_RESULT" in step["types"] and "TOOL_CALL_START" not in step["types"]
        assert effects(log, thread) == ["delete_user 1001"]
        assert second.get("/interrupts")["interrupts"] == []
    finally:
        second.stop()


def _race(store: str, log: Path) -> None:
    servers = [Server(store, log), Server(store, log)]
    try:
        thread = "t-" + uuid.uuid4().hex[:8]
        iid = _pause(servers[0], thread)
        body = {
            "threadId": thread,
            "resume": [{"interruptId": iid, "status": "resolved", "payload": {"approved": True},
                        "metadata": {"reviewer": "racer"}}],
        }  # fmt: skip
        results: dict[int, Any] = {}
        go = threading.Barrier(4)

        def client(n: int) -> None:
            go.wait()
            try:
                results[n] = servers[n % 2].run("ops", {**body, "runId": f"r{n}"})
            except BaseException as exc:  # reported below
                results[n] = exc

        workers = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=300)
        assert effects(log, thread) == ["delete_user 1001"]  # one effect, four resumes
        outcomes = []
        for n in range(4):
            events = results[n]
            assert isinstance(events, list), events
            assert types(events)[-1] == "RUN_FINISHED", types(events)
            result = next(e for _, e in events if e["type"] == "TOOL_CALL_RESULT")
            outcomes.append((result["content"], events[-1][1]["result"]))
        assert len(set(outcomes)) == 1  # the same outcome for every client
        assert servers[1].get("/interrupts")["interrupts"] == []
    finally:
        for s in servers:
            s.stop()


def test_four_concurrent_resumes_through_two_servers_on_sqlite(tmp_path: Path) -> None:
    _race(str(tmp_path / "s.db"), tmp_path / "e.log")


def test_four_concurrent_resumes_through_two_servers_on_postgres(tmp_path: Path) -> None:
    from tests._helpers import fresh_pg

    dsn = pg_dsn()
    fresh_pg().close()
    _race(dsn, tmp_path / "e.log")
