"""Issue 27, case 12: the pydantic dump of a snapshot round-trips exactly, like the
canonical ``to_json()``: ``restore(s.snapshot().model_dump_json()).snapshot()
.model_dump_json()`` is the same text, for sessions at every point a user can stop them —
new, paused for a tool or a graph approval, decided, resumed, finished, forked, failed on
their model, with their checkpoint history. Before, the history's newest checkpoint
gained default fields (its base state was read from the dump's spelled-out defaults)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intermission import (
    HITL,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    TeamAgent,
    ToolCall,
    tool,
)
from intermission.examples import build_change_graph, build_ops_agent
from intermission.stores import MemoryStore


def check_round_trip(s: InMemoryAgentSession) -> None:
    dumped = s.snapshot().model_dump_json()
    restored = InMemoryAgentSession.restore(dumped)
    assert restored.snapshot().model_dump_json() == dumped
    assert restored.to_json() == s.to_json()  # and the same session, canonically
    # from the model object too; from a dict, the same data (a dict is checked as JSON,
    # which orders its keys)
    assert InMemoryAgentSession.restore(s.snapshot()).snapshot().model_dump_json() == dumped
    as_dict = json.loads(dumped)
    again_dict = InMemoryAgentSession.restore(as_dict).snapshot().model_dump_json()
    assert json.loads(again_dict) == as_dict
    # and a second trip changes nothing either
    again = InMemoryAgentSession.restore(restored.snapshot().model_dump_json())
    assert again.snapshot().model_dump_json() == dumped


@tool
def transfer(account: str, amount: int) -> str:
    """Move money."""
    return f"moved {amount} from {account}"


def bank(checkpoints: str) -> Any:
    def script(messages: list[Any], tools: Any) -> Any:
        done = [m for m in messages if m.role == "tool"]
        if len(done) >= 2:
            return "all done"
        return [ToolCall("transfer", {"account": "a", "amount": 5}),
                ToolCall("transfer", {"account": "b", "amount": 7})]  # fmt: skip

    return (
        ReActAgent.of(ScriptedModel(script)).name("bank").tools(transfer)
        .interceptor(HITLInterceptor().on_tool("transfer")).checkpoints(checkpoints).build()
    )  # fmt: skip


def team_with_member_hitl() -> Any:
    return TeamAgent.sequential("desk", [bank("request"), build_ops_agent()])


STEPS = st.lists(
    st.sampled_from(["approve", "edit", "reject", "skip", "resume", "fork", "save", "prompt"]),
    max_size=6,
)


def _act(agent: Any, s: InMemoryAgentSession, step: str, store: MemoryStore) -> Any:
    tasks = HITL.pending_tasks(s)
    if step in ("approve", "edit", "reject", "skip") and tasks:
        decision = {
            "approve": HITLDecision.approve().comment("ok").reviewer("alice"),
            "edit": HITLDecision.approve().modified_args(
                {"amount": 3} if tasks[0].tool_name == "transfer" else {"user_id": 2}
            ),
            "reject": HITLDecision.reject("no"),
            "skip": HITLDecision.skip("later"),
        }[step]
        HITL.submit(s, tasks[0], decision)
    elif step == "approve" and s.is_pending and s.context.get("approval.request"):
        from intermission import decide_graph

        decide_graph(s, "APPROVE", reviewer="bob")
    elif step == "resume" and s.status in ("pending", "paused"):
        agent.prompt().session(s).call()
    elif step == "prompt" and not s.is_pending:
        agent.prompt("again").session(s).call()
    elif step == "fork" and s.history:
        return s.fork(f"{s.session_id}-f", at=s.history[0].index)
    elif step == "save":
        store.save(s)
        return store.load(s.session_id)
    return s


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(["ops", "bank", "bank-nodes", "change", "change-nodes", "team"]),
    steps=STEPS,
)
def test_the_pydantic_dump_round_trips_at_every_point(which: str, steps: list[str]) -> None:
    agent = {
        "ops": build_ops_agent,
        "bank": lambda: bank("request"),
        "bank-nodes": lambda: bank("node"),
        "change": build_change_graph,
        "change-nodes": lambda: build_change_graph(checkpoints="node"),
        "team": team_with_member_hitl,
    }[which]()
    store = MemoryStore()
    s = InMemoryAgentSession.of("rt")
    check_round_trip(s)  # new
    agent.prompt("go").session(s).call()
    check_round_trip(s)  # paused
    for step in steps:
        s = _act(agent, s, step, store)
        check_round_trip(s)


def test_a_session_whose_model_failed_round_trips() -> None:
    class Down:
        async def stream(self, messages: Any, tools: Any) -> Any:
            raise ConnectionError("down")
            yield  # (an async generator)

    agent = ReActAgent.of(Down()).name("down").retry_config(max_retries=1, delay_ms=0).build()
    s = InMemoryAgentSession.of("failed")
    response = agent.prompt("hi").session(s).call()
    assert response.error is not None and s.status == "paused"
    check_round_trip(s)
