"""``RUN_FINISHED`` means saved (issue 27, case 2). A server whose lease lapses while an
approved slow tool runs — stalled, never renewing — and whose claim another holder takes
meanwhile cannot save the run: the real ``@ag-ui/client`` gets one ``RUN_ERROR`` and no
``RUN_FINISHED``; neither the replay log nor a retried ``runId`` ever shows that run as
finished, and the retry that does finish runs the tool no second time (the ledger). The
same when the database is away at the final save (in process)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.agui.interrupts import open_interrupts  # noqa: E402
from intermission.errors import SessionBusyError, StoreUnavailableError  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402
from intermission.stores.open import open_store  # noqa: E402

from . import agents  # noqa: E402
from ._server import Server, effects, js_result, parse_sse, types  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "s.db")
        return
    from tests._helpers import fresh_pg

    dsn = pg_dsn()
    fresh_pg().close()
    yield dsn


def _wait_for(path: Path, what: str, timeout: float = 120) -> None:
    until = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < until, f"{what} did not happen"
        time.sleep(0.02)


def _take_over(target: str, thread: str) -> None:
    """Another holder claims the thread once the stalled server's lease lapsed, and saves."""
    store = open_store(target)
    try:
        until = time.monotonic() + 60
        while True:
            try:
                with store.claim(thread):
                    return
            except SessionBusyError:
                assert time.monotonic() < until, "the stalled server's lease never lapsed"
                time.sleep(0.05)
    finally:
        store.close()


def test_a_run_whose_save_fails_is_an_error_for_the_real_client(
    target: str, tmp_path: Path
) -> None:
    log = tmp_path / "effects.log"
    server = Server(target, log, script="tests.agui.lease_server")
    thread = "t-" + uuid.uuid4().hex[:8]
    try:
        client = server.js_start(
            thread,
            [{"runId": "r1", "user": "go"}, {"runId": "r2", "resumeAll": {"approved": True}}],
            agent="slow",
        )
        try:
            _wait_for(log.with_name(f"entered-{thread}"), "the approved tool's start")
            _take_over(target, thread)
        finally:
            log.with_name(f"gate-{thread}").touch()  # the tool finishes after the takeover
        out = js_result(client)
        paused, resumed = out["steps"]
        assert paused["outcome"] == "interrupt" and paused["error"] is None
        # the tool ran, its result streamed; the save failed: an error, never a success
        assert "TOOL_CALL_RESULT" in resumed["types"]
        assert "RUN_FINISHED" not in resumed["types"], resumed["types"]
        assert resumed["types"][-1] == "RUN_ERROR" and resumed["types"].count("RUN_ERROR") == 1
        assert resumed["events"][-1]["code"] == "LeaseLostError"
        assert resumed["outcome"] is None  # the client reports the error, not a success
        assert resumed["runError"]["code"] == "LeaseLostError"
        assert effects(log, thread) == ["slow_step"]

        # the log has no trace of that run finishing
        logged = server.replay(thread)
        finished = [e for _, e in logged if e["type"] == "RUN_FINISHED"]
        assert [e["runId"] for e in finished] == ["r1"]

        # a retried r2 runs the resume that now saves: the ledger answers for the tool
        (iid,) = paused["pending"]
        resume = [{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]
        retry = server.run("slow", {"threadId": thread, "runId": "r2", "resume": resume})
        assert types(retry)[-1] == "RUN_FINISHED" and retry[-1][1]["outcome"]["type"] == "success"
        assert effects(log, thread) == ["slow_step"]
        assert server.get(f"/threads/{thread}")["status"] == "done"
    finally:
        server.stop()


class _FailingSaves(SQLiteStore):
    """A store whose save that ends a claim fails while ``down`` (the database away)."""

    down = False

    def _final_save(self, session: Any) -> None:
        if self.down:
            raise StoreUnavailableError("the database is away (injected)")
        super()._final_save(session)


def test_a_store_away_at_the_final_save_hands_out_no_interrupt_and_no_success(
    tmp_path: Path,
) -> None:
    """In process, raw HTTP: the save ending a pause or a resume fails; the client gets one
    RUN_ERROR and no RUN_FINISHED (no interrupt that is not in the store, no success that
    was not saved); once the database is back the same requests succeed, the tool once."""
    store = _FailingSaves(tmp_path / "s.db")
    client = TestClient(agui_app(agents.AGENTS, store), base_url="http://127.0.0.1")

    def post(body: dict[str, Any]) -> list[tuple[str, Any]]:
        return parse_sse(client.post("/agents/ops", json=body).text)

    go = {"threadId": "F", "runId": "r1", "messages": [
        {"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
    store.down = True
    failed = post(go)
    assert types(failed)[-1] == "RUN_ERROR" and "RUN_FINISHED" not in types(failed)
    assert failed[-1][1]["code"] == "StoreUnavailableError"
    assert open_interrupts(store.load("F")) == [] and store._holder("F") is None
    store.down = False
    (iid,) = [i["id"] for i in post(go)[-1][1]["outcome"]["interrupts"]]

    resume = {"threadId": "F", "runId": "r2", "messages": [], "resume": [
        {"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]}  # fmt: skip
    store.down = True
    failed = post(resume)
    assert "TOOL_CALL_RESULT" in types(failed) and "RUN_FINISHED" not in types(failed)
    assert types(failed)[-1] == "RUN_ERROR" and types(failed).count("RUN_ERROR") == 1
    assert store.load("F").status == "pending" and store._holder("F") is None
    assert not [e for _, e in client_replay(client, "F") if e.get("runId") == "r2"]
    store.down = False
    done = post(resume)
    assert done[-1][1]["type"] == "RUN_FINISHED" and done[-1][1]["outcome"]["type"] == "success"
    results = [e["content"] for _, e in done if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["user 1001 deleted"]
    assert store.load("F").status == "done"
    store.close()


def client_replay(client: TestClient, thread: str) -> list[tuple[str, Any]]:
    return parse_sse(client.get(f"/threads/{thread}/events").text)
