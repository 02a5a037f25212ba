"""``RUN_FINISHED`` means saved (issue 27, case 2). A server whose lease lapses while an
approved slow tool runs — stalled, never renewing — and whose claim another holder takes
meanwhile cannot save the run: the real ``@ag-ui/client`` gets one ``RUN_ERROR`` and no
``RUN_FINISHED``; neither the replay log nor a retried ``runId`` ever shows that run as
finished, and the retry that does finish runs the tool no second time (the ledger)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from intermission.errors import SessionBusyError  # noqa: E402
from intermission.stores.open import open_store  # noqa: E402

from ._server import Server, effects, js_result, types  # noqa: E402


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
