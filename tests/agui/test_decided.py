"""``GET /decided`` and ``GET /threads/{id}``'s ``outcomes`` (R63): each decided approval with
who decided, approved or rejected and why, what ran with which arguments and its result —
read from the store, newest first, bounded — and ``intermission.outcomes``, the data both
read, for a tool call and for a graph approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.outcomes import approval_outcomes  # noqa: E402
from intermission.stores import MemoryStore, SQLiteStore  # noqa: E402

from ._server import parse_sse  # noqa: E402
from .agents import AGENTS  # noqa: E402


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Any:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


def _run(client: TestClient, agent: str, body: dict[str, Any]) -> dict[str, Any]:
    base = {"messages": [], "state": {}, "tools": [], "context": [], "forwardedProps": {}}
    r = client.post(f"/agents/{agent}", json={**base, **body})
    assert r.status_code == 200, r.text
    return parse_sse(r.text)[-1][1]


def _ask(client: TestClient, agent: str, thread: str) -> str:
    message = {"id": "u", "role": "user", "content": "go"}
    end = _run(client, agent, {"threadId": thread, "runId": "r1", "messages": [message]})
    (interrupt,) = end["outcome"]["interrupts"]
    return str(interrupt["id"])


def _decide(client: TestClient, agent: str, thread: str, iid: str, payload: Any, who: str) -> None:
    _run(client, agent, {"threadId": thread, "runId": "r2", "resume": [
        {"interruptId": iid, "status": "resolved", "payload": payload,
         "metadata": {"reviewer": who}}]})  # fmt: skip


def test_decided_lists_each_outcome_newest_first(
    store: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGUI_EFFECTS", str(tmp_path / "effects.log"))
    client = TestClient(agui_app(AGENTS, store), base_url="http://127.0.0.1")
    ok, no, open_, graph = "t-ok", "t-no", "t-open", "t-graph"
    _decide(client, "ops", ok, _ask(client, "ops", ok), {"approved": True}, "rita")
    no_id = _ask(client, "ops", no)
    _decide(client, "ops", no, no_id, {"approved": False, "reason": "too risky"}, "sam")
    _ask(client, "ops", open_)  # still waiting: not listed
    g = _ask(client, "change", graph)
    _decide(client, "change", graph, g, {"approved": True}, "rita")

    listed = client.get("/decided").json()["decided"]
    assert [o["threadId"] for o in listed] == [graph, no, ok]  # newest first
    by = {o["threadId"]: o for o in listed}
    done = by[ok]
    assert (done["verdict"], done["tool"], done["args"]) == (
        "approve", "delete_user", {"user_id": 1001})  # fmt: skip
    assert [d["name"] for d in done["deciders"]] == ["rita"]
    assert done["ran"] == {"tool": "delete_user", "args": {"user_id": 1001},
                           "result": "user 1001 deleted", "error": None}  # fmt: skip
    assert done["answer"]["content"].startswith("Done: user 1001 deleted")
    assert (by[no]["verdict"], by[no]["reason"], by[no]["ran"]) == ("reject", "too risky", None)
    assert by[no]["interruptId"] == no_id
    assert by[graph]["interruptId"] == g and by[graph]["tool"] is None
    assert [e["status"] for e in by[graph]["effects"]] == ["completed"]
    assert by[graph]["effects"][0]["result"].startswith("applied ")

    # bounded, and the same outcome from the thread itself
    assert [o["threadId"] for o in client.get("/decided?limit=1").json()["decided"]] == [graph]
    for bad in ("0", "101", "x", "-1"):
        assert client.get(f"/decided?limit={bad}").status_code == 400
    (same,) = client.get(f"/threads/{ok}").json()["outcomes"]
    listing_only = ("threadId", "agent", "version", "served")
    assert same == {k: v for k, v in done.items() if k not in listing_only}
    assert client.get(f"/threads/{open_}").json()["outcomes"] == []


def test_outcomes_of_a_quorum_name_each_voter(store: Any, monkeypatch: Any, tmp_path: Path) -> None:
    from intermission import Principal
    from intermission.agui.auth import TokenAuth

    monkeypatch.setenv("AGUI_EFFECTS", str(tmp_path / "effects.log"))
    auth = TokenAuth({"a": Principal("alice", {"sre"}), "b": Principal("bob", {"sre"})})
    app = agui_app(AGENTS, store, auth=auth)
    alice = TestClient(app, base_url="http://127.0.0.1", headers={"Authorization": "Bearer a"})
    bob = TestClient(app, base_url="http://127.0.0.1", headers={"Authorization": "Bearer b"})
    iid = _ask(alice, "quorum", "q")
    _decide(alice, "quorum", "q", iid, {"approved": True}, "alice")
    assert alice.get("/decided").json()["decided"] == []  # one vote of two decides nothing
    _decide(bob, "quorum", "q", iid, {"approved": True}, "bob")
    (o,) = approval_outcomes(store.load("q"))
    assert [(d["name"], d["roles"], d["via"]) for d in o["deciders"]] == [
        ("alice", ["sre"], "agui"), ("bob", ["sre"], "agui")]  # fmt: skip
    assert o["ran"]["result"] == "user 1001 deleted"
    assert [x["interruptId"] for x in bob.get("/decided").json()["decided"]] == [iid]
