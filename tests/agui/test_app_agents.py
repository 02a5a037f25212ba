"""``agui_app`` takes agent instances as well as factories (issue 27), and returns an ASGI
app of a real type, :class:`AGUIApp`."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import AGUIApp, agui_app  # noqa: E402
from intermission.errors import UsageError  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from . import agents  # noqa: E402
from ._server import parse_sse  # noqa: E402


def _round_trip(client: TestClient, agent: str, thread: str) -> list[str]:
    start = {"threadId": thread, "runId": "r1", "messages": [
        {"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
    paused = parse_sse(client.post(f"/agents/{agent}", json=start).text)
    ids = [i["id"] for i in paused[-1][1]["outcome"]["interrupts"]]
    resume = [{"interruptId": i, "status": "resolved", "payload": {"approved": True}} for i in ids]
    done = parse_sse(client.post(f"/agents/{agent}", json={
        "threadId": thread, "runId": "r2", "messages": [], "resume": resume}).text)  # fmt: skip
    return [paused[-1][1]["outcome"]["type"], done[-1][1]["outcome"]["type"]]


def test_an_agent_instance_serves_every_run_like_a_factory() -> None:
    store = MemoryStore()
    app = agui_app({"ops": agents.ops(), "change": agents.change, "pair": agents.pair()}, store)
    client = TestClient(app, base_url="http://127.0.0.1")
    for agent in ("ops", "change", "pair"):
        for n in range(2):  # the same instance, run after run
            assert _round_trip(client, agent, f"{agent}-{n}") == ["interrupt", "success"]
    assert store.load("ops-1").agent == "ops"


@pytest.mark.parametrize("bad", [42, "ops", None])
def test_a_value_that_is_neither_agent_nor_factory_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(UsageError, match=r"agents\['x'\] is an agent or a function"):
        agui_app({"x": bad}, MemoryStore())


def test_an_instance_served_under_another_name_is_refused() -> None:
    with pytest.raises(UsageError, match="serve it as 'ops'"):
        agui_app({"other": agents.ops()}, MemoryStore())


def test_agui_app_is_typed_as_an_asgi_app() -> None:
    hints = typing.get_type_hints(agui_app)
    assert hints["return"] is AGUIApp
    app = agui_app(agents.AGENTS, MemoryStore())
    assert isinstance(app, AGUIApp) and callable(app)
