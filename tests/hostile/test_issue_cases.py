"""The hostile inputs of issue 14, one by one: each was a bare builtin (or worse, accepted)
on main before R42; each is now a typed error that names what is wrong and changes
nothing. And the HITL API hands out copies: editing them changes nothing that runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tests._helpers import TRANSFERS, transfer

from intermission import (
    HITL,
    FlowEngine,
    GraphDefinitionError,
    GraphSpec,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    IntermissionError,
    InvalidDecisionError,
    NotSerializableError,
    ReActAgent,
    ScriptedModel,
    SnapshotSchemaError,
    ToolCall,
    UsageError,
    decide_graph,
)
from intermission.examples import build_change_graph
from intermission.testing.conformance import paused_change


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _snapshot(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(paused_change("c").to_json())
    data.update(changes)
    return data


def _bank() -> tuple[ReActAgent, InMemoryAgentSession]:
    model = ScriptedModel([[ToolCall("transfer", {"account": "bob", "amount": 10}, id="t-1")],
                           "sent"])  # fmt: skip
    agent = (ReActAgent.of(model).name("bank").tools(transfer)
             .interceptor(HITLInterceptor().on_tool("transfer")).build())  # fmt: skip
    s = InMemoryAgentSession.of("bank-1")
    agent.prompt("pay bob").session(s).call()
    return agent, s


def _route_without_reason() -> dict[str, Any]:
    data = json.loads(_bank()[1].to_json())
    data["traces"]["bank"]["last_reason"] = None
    return data


def _unknown_position() -> dict[str, Any]:
    data = _snapshot()
    data["flow"]["graphs"]["change"]["tokens"] = ["nope"]
    return data


CASES: dict[str, tuple[Callable[[], Any], type[IntermissionError]]] = {
    "max_events=-1": (lambda: InMemoryAgentSession("s", max_events=-1), UsageError),
    "max_events=2**63": (lambda: InMemoryAgentSession("s", max_events=2**63), UsageError),
    "snapshot JSON nested 2,000 deep": (
        lambda: InMemoryAgentSession.restore(_deep(2000)), SnapshotSchemaError),
    "context nested 2,000 deep": (
        lambda: InMemoryAgentSession.restore(
            json.dumps(_snapshot())[:-1] + ',"context":{"x":' + _deep(2000) + "}}"),
        SnapshotSchemaError),
    "graph JSON nested 2,000 deep": (
        lambda: GraphSpec.from_json(_deep(2000)), GraphDefinitionError),
    "snapshot dict holding object()": (
        lambda: InMemoryAgentSession.restore(_snapshot(context={"x": object()})),
        SnapshotSchemaError),
    "route 'action' without last_reason": (
        lambda: InMemoryAgentSession.restore(_route_without_reason()), SnapshotSchemaError),
    "decision comment of the wrong type": (
        lambda: HITLDecision("approve", comment=5), InvalidDecisionError),  # type: ignore[arg-type]
    "decision reviewer of the wrong type": (
        lambda: HITLDecision.approve().reviewer(["x"]), InvalidDecisionError),  # type: ignore[arg-type]
    "modified_args='abc'": (
        lambda: HITLDecision("approve", modified_args="abc"), InvalidDecisionError),  # type: ignore[arg-type]
    "a task given as an int": (
        lambda: HITL.submit(_bank()[1], 5, HITLDecision.approve()), InvalidDecisionError),  # type: ignore[arg-type]
    "decide_graph(reason=object())": (
        lambda: decide_graph(paused_change("d"), "REJECT", reason=object()),  # type: ignore[arg-type]
        InvalidDecisionError),
    "float('inf') in the context": (
        lambda: InMemoryAgentSession.of("i").context.put("x", float("inf")), NotSerializableError),
    "Infinity in snapshot JSON": (
        lambda: InMemoryAgentSession.restore(json.dumps(_snapshot(context={"x": float("inf")}))),
        SnapshotSchemaError),
}  # fmt: skip

HOSTILE_GRAPHS = [
    '{"id": "g", "layout": "nodes"}',
    '{"id": 5, "layout": []}',
    '{"id": "g", "layout": [{"id": "s", "type": "start", "link": 7}]}',
    '{"id": "g", "layout": [{"id": "s", "type": "start", "link": [{"next_id": "e", '
    '"priority": "high"}]}, {"id": "e", "type": "end"}]}',
    '{"id": "g", "layout": [{"id": ["s"], "type": "start"}]}',
    '{"id": "g", "layout": [{"id": "s", "type": ["start"]}]}',
    '{"id": "g", "layout": [{"id": "s", "type": "start", "title": {"t": 1}}]}',
    '{"id": "g", "layout": [{"id": "l", "type": "loop", "over": 5}]}',
    '{"id": "g", "layout": [{"id": "x", "type": "subgraph", "graph": "nope"}]}',
    '{"id": "g", "layout": [{"id": "s", "type": "start", "meta": [1, 2]}]}',
    '{"id": "g", "meta": {"a": NaN}, "layout": []}',
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_hostile_input_of_issue_14_is_a_typed_error(name: str) -> None:
    call, kind = CASES[name]
    with pytest.raises(kind):
        call()


@pytest.mark.parametrize("text", HOSTILE_GRAPHS)
def test_hostile_graph_files_are_graph_definition_errors(text: str) -> None:
    import yaml

    with pytest.raises(GraphDefinitionError):
        GraphSpec.from_json(text)
    if "NaN" not in text:
        with pytest.raises(GraphDefinitionError):
            GraphSpec.from_yaml(yaml.safe_dump(json.loads(text)))


def test_a_position_naming_no_node_is_refused_before_anything_changes() -> None:
    s = InMemoryAgentSession.restore(_unknown_position())  # (a snapshot has no graph)
    before = s.to_json()
    with pytest.raises(SnapshotSchemaError, match="'nope' is not a node"):
        build_change_graph().prompt().session(s).call()
    with pytest.raises(SnapshotSchemaError):
        FlowEngine().eval(build_change_graph().spec, s.context)
    assert s.to_json() == before


def test_a_refused_graph_decision_leaves_the_session_savable() -> None:
    s = paused_change("g")
    before = s.to_json()
    with pytest.raises(InvalidDecisionError):
        decide_graph(s, "REJECT", reason=object())  # type: ignore[arg-type]
    assert s.to_json() == before


def test_mutating_what_the_hitl_api_returns_changes_nothing_that_runs() -> None:  # R42
    TRANSFERS.clear()
    agent, s = _bank()
    (task,) = HITL.pending_tasks(s)
    task.args["amount"] = 999  # an edit outside modified_args
    assert HITL.pending_tasks(s)[0].args["amount"] == 10
    assert HITL.get_pending_task_by_call_uuid(s, "t-1").args["amount"] == 10  # type: ignore[union-attr]
    with pytest.raises(InvalidDecisionError, match="changed since it was read"):
        HITL.submit(s, task, HITLDecision.approve())  # the edited copy is refused
    (pending_event,) = [e for e in s.events if e.kind == "hitl_pending"]
    pending_event.tasks[0].args["amount"] = 777  # type: ignore[union-attr]
    record = HITL.submit(s, "t-1", HITLDecision.approve().reviewer("lead"))
    with pytest.raises(ValueError):
        record.verdict = "reject"  # type: ignore[misc]  # records are frozen
    copy = HITL.get_decision(s, "t-1")
    assert copy is not None and copy == record
    assert json.loads(s.to_json())["hitl"]["tasks"][0]["args"] == {"account": "bob", "amount": 10}
    assert agent.prompt().session(s).call().content == "sent"
    assert TRANSFERS == [("bob", 10)]  # what was approved is what ran


def test_the_edit_that_counts_goes_through_modified_args_and_is_recorded() -> None:
    TRANSFERS.clear()
    agent, s = _bank()
    HITL.submit(s, "t-1", HITLDecision.approve().modified_args({"amount": 5}).reviewer("lead"))
    agent.prompt().session(s).call()
    (decided,) = [e for e in s.events if e.kind == "hitl_decided"]
    assert TRANSFERS == [("bob", 5)] and decided.decision.modified_args == {"amount": 5}
