"""AG-UI runs carry W3C ``traceparent`` in and out: a client's trace continues into the
server's run (its ``invoke_agent`` under the server span, under the client's span), the
response says the run's trace context, and an AG-UI resume links to the pause."""

from __future__ import annotations

import re
from typing import Any

from tests._helpers import need_module
from tests.otel._spans import events, one

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")

from starlette.testclient import TestClient  # noqa: E402
from tests.agui._server import parse_sse  # noqa: E402
from tests.agui.agents import AGENTS  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[0-9a-f]$")


def test_a_clients_traceparent_continues_into_the_run_and_comes_back(traced: Any) -> None:
    client = TestClient(agui_app(AGENTS, MemoryStore()), base_url="http://127.0.0.1")
    body = {"threadId": "T1", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "go"}]}  # fmt: skip
    r = client.post("/agents/ops", json=body,
                    headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"})  # fmt: skip
    assert r.status_code == 200
    interrupts = parse_sse(r.text)[-1][1]["outcome"]["interrupts"]
    spans = traced.spans()
    server = one(spans, "POST /agents/{name}")
    assert server["kind"] == "SERVER"
    assert server["trace"] == CLIENT_TRACE and server["parent"] == CLIENT_SPAN
    assert server["attributes"]["gen_ai.conversation.id"] == "T1"
    assert server["attributes"]["intermission.agui.run_id"] == "r1"
    run = one(spans, "invoke_agent ops")
    assert run["trace"] == CLIENT_TRACE and run["parent"] == server["span"]
    assert run["attributes"]["gen_ai.conversation.id"] == "T1"
    assert events(run, "intermission.pause")
    back = TRACEPARENT.match(r.headers["traceparent"])
    assert back is not None and back.groups() == (CLIENT_TRACE, server["span"])

    # the resume, a later request with no traceparent: a trace of its own, linked
    traced.clear()
    resume = {"threadId": "T1", "runId": "r2", "messages": [], "resume": [
        {"interruptId": interrupts[0]["id"], "status": "resolved",
         "payload": {"approved": True}, "metadata": {"reviewer": "ann"}}]}  # fmt: skip
    r2 = client.post("/agents/ops", json=resume)
    assert r2.status_code == 200 and "RUN_FINISHED" in r2.text
    spans = traced.spans()
    server2 = one(spans, "POST /agents/{name}")
    again = one(spans, "invoke_agent ops")
    assert server2["parent"] is None and server2["trace"] != CLIENT_TRACE
    assert again["parent"] == server2["span"]
    (link,) = again["links"]
    assert (link["trace"], link["span"]) == (run["trace"], run["span"])
    (decision,) = events(again, "intermission.decision.applied")
    assert decision["intermission.decision.verdict"] == "approve"
    assert one(spans, "execute_tool delete_user")["attributes"]["intermission.tool.executed"]
    assert TRACEPARENT.match(r2.headers["traceparent"]).group(1) == server2["trace"]  # type: ignore[union-attr]


def test_without_tracing_the_response_carries_no_trace_context() -> None:
    client = TestClient(agui_app(AGENTS, MemoryStore()), base_url="http://127.0.0.1")
    body = {"threadId": "T2", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "go"}]}  # fmt: skip
    r = client.post("/agents/ops", json=body,
                    headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"})  # fmt: skip
    assert r.status_code == 200 and "traceparent" not in r.headers


def test_a_resume_the_server_refuses_before_the_policy_is_still_on_record(traced: Any) -> None:
    # a decision refused by the interrupt rules (another outcome stands) is a refused
    # decision in the audit trail, and so in the trace, as on every other surface
    store = MemoryStore()
    client = TestClient(agui_app(AGENTS, store), base_url="http://127.0.0.1")
    body = {"threadId": "T3", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "go"}]}  # fmt: skip
    interrupts = parse_sse(client.post("/agents/ops", json=body).text)[-1][1]["outcome"]
    iid = interrupts["interrupts"][0]["id"]

    def resume(run: str, payload: dict[str, Any], who: str) -> Any:
        data = {"threadId": "T3", "runId": run, "messages": [], "resume": [
            {"interruptId": iid, "status": "resolved", "payload": payload,
             "metadata": {"reviewer": who}}]}  # fmt: skip
        return parse_sse(client.post("/agents/ops", json=data).text)[-1][1]

    assert resume("r2", {"approved": True}, "alice")["type"] == "RUN_FINISHED"
    traced.clear()
    assert resume("r3", {"approved": False, "reason": "no"}, "bob")["code"] == "DECISION_CONFLICT"
    (entry,) = [r for r in store.audit("T3") if r.action == "decision.refused"]
    refused = one(traced.spans(), "intermission.decision.refused")["attributes"]
    assert refused["intermission.decision.error"] == "DecisionConflictError"
    assert refused["intermission.decision.principal"] == entry.actor == "bob"
    assert refused["intermission.decision.via"] == "agui"
    assert refused["gen_ai.conversation.id"] == "T3"
