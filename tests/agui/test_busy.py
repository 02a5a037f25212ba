"""Many runs in flight do not freeze the API: a streaming run awaits its frames without
holding a threadpool slot, so ``GET /interrupts`` answers while more runs wait than the
pool has slots (40)."""

from __future__ import annotations

import asyncio

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

import httpx  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from . import agents  # noqa: E402
from ._server import parse_sse  # noqa: E402

RUNS = 45


def test_reads_answer_while_more_runs_wait_than_the_threadpool_has_slots() -> None:
    store = MemoryStore()
    app = agui_app(agents.AGENTS, store)
    sync = TestClient(app, base_url="http://127.0.0.1")
    ids = {}
    for n in range(RUNS):
        r = sync.post("/agents/gated", json={"threadId": f"g{n}", "runId": "r1", "messages": [
            {"id": "u", "role": "user", "content": "go"}]})  # fmt: skip
        ids[n] = [i["id"] for i in parse_sse(r.text)[-1][1]["outcome"]["interrupts"]]

    async def main() -> tuple[int, list[str]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:

            async def resume(n: int) -> str:
                r = await c.post("/agents/gated", timeout=600, json={
                    "threadId": f"g{n}", "runId": "r2", "messages": [], "resume": [
                        {"interruptId": i, "status": "resolved", "payload": {"approved": True}}
                        for i in ids[n]]})  # fmt: skip
                return str(parse_sse(r.text)[-1][1]["outcome"]["type"])

            runs = [asyncio.create_task(resume(n)) for n in range(RUNS)]
            for _ in range(RUNS):  # every tool is running, each run's response waiting
                await asyncio.to_thread(agents.ENTERED.acquire, timeout=300)
            try:
                # a guard against a hang, not a timing: the read would wait forever
                listed = await asyncio.wait_for(c.get("/interrupts"), timeout=120)
            finally:
                agents.GATE.set()
            return listed.status_code, list(await asyncio.gather(*runs))

    agents.GATE.clear()
    status, outcomes = asyncio.run(main())
    assert status == 200
    assert outcomes == ["success"] * RUNS


def test_a_thread_held_by_a_dead_server_is_thread_busy_naming_when_its_claim_lapses() -> None:
    """A claim whose holder is gone (here: held and never released, as by a SIGKILLed
    server) is a lease of minutes: a resume answers THREAD_BUSY with who holds it and when
    it lapses, and changes nothing."""
    store = MemoryStore()
    client = TestClient(agui_app(agents.AGENTS, store), base_url="http://127.0.0.1")
    r = client.post("/agents/ops", json={"threadId": "D", "runId": "r1", "messages": [
        {"id": "u", "role": "user", "content": "go"}]})  # fmt: skip
    ids = [i["id"] for i in parse_sse(r.text)[-1][1]["outcome"]["interrupts"]]
    held = store.resume("D")
    held.__enter__()
    try:
        before = store.load("D").to_json()
        r = client.post("/agents/ops", json={"threadId": "D", "runId": "r2", "messages": [],
            "resume": [{"interruptId": i, "status": "resolved", "payload": {"approved": True}}
                       for i in ids]})  # fmt: skip
        error = parse_sse(r.text)[-1][1]
        assert error["type"] == "RUN_ERROR" and error["code"] == "THREAD_BUSY"
        assert "lapses at 20" in error["message"] and store._holder("D") in error["message"]
        assert store.load("D").to_json() == before
    finally:
        held.__exit__(None, None, None)
