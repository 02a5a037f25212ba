"""The bundled examples as ``serve`` runs them without ``--agents`` (issue 41): each demo
session (``demo --session ID``) is a thread of the change graph that applies its own change,
named by the thread — not "change-001" for every thread."""

from __future__ import annotations

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from pathlib import Path  # noqa: E402

from starlette.testclient import TestClient  # noqa: E402

from intermission._cli_agents import load_agents  # noqa: E402
from intermission.agui import agui_app  # noqa: E402
from intermission.cli import main  # noqa: E402
from intermission.examples import build_change_graph  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402

from ._server import parse_sse  # noqa: E402


def _approved(client: TestClient, thread: str) -> str:
    """Approve the open interrupt of ``thread`` over AG-UI; the answer the run ends with."""
    listed = client.get("/interrupts").json()["interrupts"]
    (interrupt,) = [x["interrupt"] for x in listed if x["threadId"] == thread]
    resume = [{"interruptId": interrupt["id"], "status": "resolved",
               "payload": {"approved": True}, "metadata": {"reviewer": "alice"}}]  # fmt: skip
    done = parse_sse(client.post("/agents/change", json={
        "threadId": thread, "runId": "r2", "messages": [], "resume": resume,
        "state": {}, "tools": [], "context": [], "forwardedProps": {}}).text)  # fmt: skip
    assert done[-1][1]["type"] == "RUN_FINISHED", done[-1]
    return str(done[-1][1]["result"])


def test_each_served_thread_applies_its_own_change(tmp_path: Path) -> None:
    path = str(tmp_path / "demo.sqlite")
    threads = ("change-042", "ticket-7")
    for thread in threads:  # the demo's sessions: what the bundled examples serve
        assert main(["demo", "--session", thread, "--store", path]) == 0
    store = SQLiteStore(path)
    client = TestClient(agui_app(load_agents(None), store), base_url="http://127.0.0.1")
    answers = {thread: _approved(client, thread) for thread in threads}
    assert answers == {
        "change-042": "Change executed: applied change-042",
        "ticket-7": "Change executed: applied ticket-7",
    }
    for thread in threads:
        session = store.load(thread)
        assert session.context.get("change.result") == f"applied {thread}"
        assert list(session.ledger) == [f"{thread}/execute"]  # once, under its own key
        assert session.ledger[f"{thread}/execute"].status == "completed"
    store.close()


def test_the_served_graph_is_the_same_agent_as_the_bundled_one() -> None:
    """A demo session saved before (made by ``build_change_graph()``) still resumes: how
    the executor is told its change is no part of the agent's fingerprint."""
    (served,) = load_agents(None).agents("change")
    assert served.fingerprint == build_change_graph().fingerprint


def test_the_bundled_examples_take_a_new_thread_started_over_agui(tmp_path: Path) -> None:
    """A thread a client starts on the bundled change graph (no ``--agents``) is the
    graph's own — the server records its name and nothing has run — and pauses at the
    approval, then applies its own change; it was refused as "belonging to agent 'change',
    not to agent 'change'". A session that ran without a fingerprint stays refused
    (tests/test_cli_agents.py)."""
    store = SQLiteStore(str(tmp_path / "new.sqlite"))
    client = TestClient(agui_app(load_agents(None), store), base_url="http://127.0.0.1")
    started = parse_sse(client.post("/agents/change", json={
        "threadId": "chg-9", "runId": "r1", "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "u", "role": "user", "content": "go"}],
    }).text)  # fmt: skip
    assert started[-1][1]["type"] == "RUN_FINISHED", started[-1]
    assert started[-1][1]["outcome"]["type"] == "interrupt"
    assert _approved(client, "chg-9") == "Change executed: applied chg-9"
    store.close()
