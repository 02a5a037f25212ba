"""R28 snapshots and R12 graph files."""

from __future__ import annotations

import json

import pytest
from tests._helpers import approval_task, change_graph

from intermission import (
    FlowEngine,
    GraphDefinitionError,
    GraphSpec,
    InMemoryAgentSession,
    NotSerializableError,
    Registry,
    SnapshotSchemaError,
)


def test_r28_snapshot_is_canonical_json_with_schema_version() -> None:  # R28
    s = InMemoryAgentSession.of("change-001")
    FlowEngine().eval(change_graph(), s.context)
    text = s.to_json()
    data = json.loads(text)
    assert data["schema_version"] == 1 and data["pending"] is True
    assert data["pending_reason"] == "change plan awaits human review"
    assert data["flow"]["graphs"]["change"]["tokens"] == ["approval"]
    assert InMemoryAgentSession.restore(text).to_json() == text
    assert InMemoryAgentSession.restore(data).to_json() == text
    assert InMemoryAgentSession.restore(s.snapshot()).to_json() == text


def test_r28_non_json_value_is_refused_naming_the_key() -> None:  # R28
    s = InMemoryAgentSession.of("x")
    s.context.put("ok", {"nested": [1, 2]})
    # refused when it enters the session, and nothing changes
    for bad in ({"inner": [1, object()]}, float("inf"), [float("-inf")], {"when": Ellipsis}):
        with pytest.raises(NotSerializableError):
            s.context.put("bad", bad)
        with pytest.raises(NotSerializableError):
            s.context["bad"] = bad
    assert "bad" not in s.context
    # a value changed in place after it entered is caught at save time, naming its path
    s.context.get("ok")["nested"].append(object())
    with pytest.raises(NotSerializableError) as info:
        s.snapshot()
    assert info.value.key == "ok.nested[2]"


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d.update(pending="maybe"), "pending"),
        (lambda d: d["flow"]["graphs"]["change"].update(tokens=[3]), "flow.graphs.change.tokens.0"),
    ],
)
def test_r28_bad_snapshots_are_typed_errors_naming_the_path(mutate, path) -> None:  # type: ignore[no-untyped-def]  # R28
    s = InMemoryAgentSession.of("c")
    FlowEngine().eval(change_graph(), s.context)
    data = json.loads(s.to_json())
    mutate(data)
    with pytest.raises(SnapshotSchemaError) as info:
        InMemoryAgentSession.restore(json.dumps(data))
    assert info.value.path == path


def test_r28_garbage_is_a_typed_error() -> None:  # R28
    for junk in ("{", "[]", "null", '{"schema_version": 1}'):
        with pytest.raises(SnapshotSchemaError):
            InMemoryAgentSession.restore(junk)


def _registry() -> Registry:
    reg = Registry()
    reg.add("task", "approval", approval_task)
    reg.add("task", "execute", lambda ctx, node: ctx.put("change.result", "executed"))
    reg.add("condition", "approved", lambda ctx: ctx.get("approval.decision") == "APPROVE")
    return reg


YAML_GRAPH = """
id: change
title: Change approval
layout:
  - {id: start, type: start, link: approval}
  - id: approval
    type: activity
    title: Human review
    task: approval
    link: approval_route
  - id: approval_route
    type: exclusive
    link:
      - {next_id: executor, when: approved, title: approved}
      - reject_finish
  - {id: executor, task: execute, link: end}
  - {id: reject_finish, link: end}
  - {id: end, type: end}
"""


def test_r12_yaml_graph_runs_and_round_trips() -> None:  # R12
    reg = _registry()
    spec = GraphSpec.from_yaml(YAML_GRAPH, reg)
    assert spec.get_node("approval").title_text == "Human review"
    s = InMemoryAgentSession.of("y")
    FlowEngine().eval(spec, s.context)
    assert s.is_pending
    s.context.put("approval.decision", "APPROVE")
    FlowEngine().eval(spec, s.context)
    assert s.context["change.result"] == "executed"
    again = GraphSpec.from_json(spec.to_json(), reg)
    assert again.to_dict() == spec.to_dict()
    assert GraphSpec.from_yaml(spec.to_yaml(), reg).to_dict() == spec.to_dict()


def test_r12_unknown_names_fail_at_load_time() -> None:  # R12
    reg = _registry()
    reg._items["condition"].clear()
    with pytest.raises(GraphDefinitionError, match="unknown condition 'approved'") as info:
        GraphSpec.from_yaml(YAML_GRAPH, reg)
    assert info.value.node_id == "approval_route"


def test_r12_unregistered_callable_cannot_be_saved() -> None:  # R12
    with pytest.raises(GraphDefinitionError, match="no registry name"):
        change_graph().to_json()


def test_r28_fast_and_validated_snapshots_are_the_same_text() -> None:  # R28
    from intermission import HITL
    from intermission.examples import build_change_graph, build_ops_agent

    sessions = []
    for build, prompt in ((build_change_graph, "upgrade"), (build_ops_agent, "delete 1001")):
        agent = build()
        s = InMemoryAgentSession.of(prompt)
        agent.prompt(prompt).session(s).call()
        sessions.append(s)
        s2 = InMemoryAgentSession.restore(s.to_json())  # restored events + new events
        if HITL.pending_tasks(s2):
            HITL.approve_all(s2, reviewer="lead")
        else:
            s2.context.put("approval.decision", "APPROVE")
        agent.prompt().session(s2).call()
        sessions.append(s2)
    for s in sessions:
        text = s.to_json()
        assert s.snapshot().to_json() == text
        assert InMemoryAgentSession.restore(text).to_json() == text
        assert InMemoryAgentSession.restore(text).snapshot().to_json() == text
