"""A quorum over AG-UI: a resume with one approval ends with the interrupt still open (its
metadata listing the approvals so far), a retried delivery of that run is replayed (the
vote is not counted twice, nothing runs), a second run of the same principal is refused,
and a second principal's resume completes it. A graph approval's interrupt keeps its id
through the pause a vote causes. Refusals reach the store's audit trail."""

from __future__ import annotations

from typing import Any

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")

from starlette.testclient import TestClient  # noqa: E402

from intermission import ApprovalPolicy, Principal  # noqa: E402
from intermission.agui import agui_app  # noqa: E402
from intermission.agui.auth import TokenAuth  # noqa: E402
from intermission.examples import build_change_graph  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from ._server import parse_sse  # noqa: E402
from .agents import AGENTS  # noqa: E402

TOKENS = {"t-ann": Principal("ann", {"sre"}), "t-ben": Principal("ben", {"sre"}),
          "t-cid": Principal("cid", {"dev"}), "t-dee": Principal("dee", {"sre"})}  # fmt: skip


def graph() -> Any:
    return build_change_graph(policy=ApprovalPolicy(roles={"sre"}, approvals=2,
                                                    not_requester=True))  # fmt: skip


class World:
    def __init__(self) -> None:
        self.store = MemoryStore()
        agents = {**AGENTS, "change": graph}
        app = agui_app(agents, self.store, auth=TokenAuth(TOKENS))
        self.client = TestClient(app, base_url="http://127.0.0.1")

    def post(self, token: str, agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        r = self.client.post(f"/agents/{agent}", json=body,
                             headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 200, r.text
        return [e for _, e in parse_sse(r.text)]

    def start(self, token: str, agent: str, thread: str) -> str:
        events = self.post(token, agent, {"threadId": thread, "runId": "r0", "messages": [
            {"id": "u0", "role": "user", "content": "go"}]})  # fmt: skip
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        return str(interrupt["id"])

    def resume(self, token: str, agent: str, thread: str, run: str, iid: str,
               approved: bool = True) -> list[dict[str, Any]]:  # fmt: skip
        payload: dict[str, Any] = {"approved": approved}
        if not approved:
            payload["reason"] = "no"
        return self.post(token, agent, {"threadId": thread, "runId": run, "messages": [],
                                        "resume": [{"interruptId": iid, "status": "resolved",
                                                    "payload": payload}]})  # fmt: skip


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_one_approval_leaves_the_interrupt_open_a_retry_replays_a_second_principal_completes(
    monkeypatch: Any, tmp_path: Any
) -> None:
    log = tmp_path / "effects"
    monkeypatch.setenv("AGUI_EFFECTS", str(log))
    w = World()
    iid = w.start("t-cid", "quorum", "Q")
    first = w.resume("t-ann", "quorum", "Q", "r1", iid)
    assert first[-1]["type"] == "RUN_FINISHED" and first[-1]["outcome"]["type"] == "interrupt"
    (still,) = first[-1]["outcome"]["interrupts"]
    meta = still["metadata"]["intermission"]
    assert still["id"] == iid and [a["name"] for a in meta["approvals"]] == ["ann"]
    assert meta["progress"] == "1 of 2 approvals (ann, sre) — waiting for one more from anyone else"
    assert meta["approvalsNeeded"] == 2
    listed = w.client.get("/interrupts", headers={"Authorization": "Bearer t-ben"}).json()
    assert (
        listed["interrupts"][0]["interrupt"]["metadata"]["intermission"]["progress"]
        == (meta["progress"])
    )
    before = w.store.load("Q").to_json()
    again = w.resume("t-ann", "quorum", "Q", "r1", iid)  # the same run, delivered again
    assert kinds(again) == kinds(first) and w.store.load("Q").to_json() == before
    second_run = w.resume("t-ann", "quorum", "Q", "r2", iid)  # ann again, another run
    assert second_run[-1]["type"] == "RUN_ERROR" and second_run[-1]["code"] == "DECISION_REFUSED"
    assert "counts once" in second_run[-1]["message"]
    assert w.store.load("Q").to_json() == before
    assert not log.exists() or "Q " not in log.read_text()
    done = w.resume("t-ben", "quorum", "Q", "r3", iid)
    assert done[-1]["type"] == "RUN_FINISHED" and done[-1].get("outcome", {}).get("type") in (
        None,
        "success",
    )
    assert [line for line in log.read_text().splitlines() if line.startswith("Q ")] == [
        "Q delete_user 1001"
    ]
    refused = [r for r in w.store.audit("Q") if r.action == "decision.refused"]
    assert [(r.actor, r.via, r.authenticated, r.detail["rule"]) for r in refused] == [
        ("ann", "agui", True, "twice")
    ]


def test_a_graph_approval_keeps_its_interrupt_id_through_a_vote(
    monkeypatch: Any, tmp_path: Any
) -> None:
    monkeypatch.setenv("AGUI_EFFECTS", str(tmp_path / "effects"))
    w = World()
    iid = w.start("t-ann", "change", "G")  # ann asks: she may not decide it
    s = w.store.load("G")
    assert s.context.get("approval.requester")["name"] == "ann"
    mine = w.resume("t-ann", "change", "G", "r1", iid)
    assert mine[-1]["code"] == "REVIEWER_NOT_ALLOWED" and "someone else must" in mine[-1]["message"]
    other = w.resume("t-cid", "change", "G", "r2", iid)
    assert other[-1]["code"] == "REVIEWER_NOT_ALLOWED" and "roles sre" in other[-1]["message"]
    vote = w.resume("t-ben", "change", "G", "r3", iid)
    (still,) = vote[-1]["outcome"]["interrupts"]
    assert still["id"] == iid  # the same approval, the same id
    assert "1 of 2 approvals (ben, sre)" in still["metadata"]["intermission"]["progress"]
    done = w.resume("t-dee", "change", "G", "r4", iid)
    assert done[-1]["type"] == "RUN_FINISHED"
    assert done[-1].get("outcome", {"type": "success"})["type"] == "success"
    final = w.store.load("G")
    assert final.status == "done" and final.context.get("approval.decision") == "APPROVE"
    assert [v["name"] for v in final.context.get("approval.votes")] == ["ben", "dee"]


def test_a_resume_after_the_sweeper_expired_the_interrupt_is_refused_and_audited() -> None:
    """The expiry is nobody's decision: a late rejection (by someone without the role, or
    with it) is a conflict with the deadline's, not a success, and the thread is as it was."""
    from tests.hitl.test_policy_deadlines import T0, WARN, Clock, agent

    from intermission.stores import sweep_deadlines

    clock = Clock()
    store = MemoryStore(clock=clock)
    app = agui_app({"deploy": lambda: agent(WARN)}, store, auth=TokenAuth(TOKENS))
    client = TestClient(app, base_url="http://127.0.0.1")

    def post(token: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        r = client.post("/agents/deploy", json={"messages": [], **body},
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 200, r.text
        return [e for _, e in parse_sse(r.text)]

    started = post("t-cid", {"threadId": "E", "runId": "r0", "messages": [
        {"id": "u0", "role": "user", "content": "deploy"}]})  # fmt: skip
    (interrupt,) = started[-1]["outcome"]["interrupts"]
    clock.t = T0 + 5000
    assert sweep_deadlines(store) == ["E"]
    before = store.load("E").to_json()
    for token, run in (("t-cid", "r1"), ("t-ann", "r2")):
        late = post(token, {"threadId": "E", "runId": run, "resume": [
            {"interruptId": interrupt["id"], "status": "resolved",
             "payload": {"approved": False, "reason": "too late"}}]})  # fmt: skip
        assert late[-1]["type"] == "RUN_ERROR" and late[-1]["code"] == "DECISION_CONFLICT"
        assert "by the deadline" in late[-1]["message"]
        assert store.load("E").to_json() == before
    refused = [r.actor for r in store.audit("E") if r.action == "decision.refused"]
    assert refused == ["cid", "ann"]
