"""Issue 40, adversary 2: a migration that rewrites a pending call's arguments gives the
call a new UUID (``<old>.r1``) and voids its approval — a new interrupt for the reviewer.

Found: ``migrate ID --to 2`` (``table.migrate`` under the store's claim) saved the
rewritten session with no notification at all: the outbox kept only the first pause's,
naming the old call UUID and the old arguments — an approval addressed to it is refused,
and nobody was told of the call that now waits (the reviewer learnt of it only by
looking). The resume path (``decide_and_resume`` migrating) did tell, since its run paused
again; a migration that runs nothing must tell too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from intermission import (
    HITL,
    AgentTable,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.errors import InvalidDecisionError
from intermission.stores import SQLiteStore, decide_and_resume

RAN: list[Any] = []


@tool
def scale_v1(service: str) -> str:
    """Scale a service up."""
    RAN.append(("v1", service))
    return "ok"


@tool
def scale_v2(service: str, replicas: int) -> str:
    """Scale a service to a number of replicas."""
    RAN.append(("v2", service, replicas))
    return "ok"


scale_v1.name = scale_v2.name = "scale"


def _ops(version: str, scale: Any, args: dict[str, Any]) -> Any:
    model = ScriptedModel([[ToolCall("scale", args)], "Done."])
    return (
        ReActAgent.of(model).name("ops").version(version).tools(scale)
        .interceptor(HITLInterceptor().on_tool("scale")).build()
    )  # fmt: skip


def _upcast(session: Any) -> None:
    for task in session.hitl.tasks:
        HITL.rewrite_args(session, task, {**task.args, "replicas": 3})


def _paused(tmp_path: Path) -> tuple[SQLiteStore, AgentTable, str]:
    RAN.clear()
    store = SQLiteStore(str(tmp_path / "s.sqlite"), outbox=True)
    v1 = _ops("1", scale_v1, {"service": "api"})
    s = InMemoryAgentSession.of("t7")
    v1.prompt("Scale the API").session(s).call()
    store.save(s)
    v2 = _ops("2", scale_v2, {"service": "api", "replicas": 2}).migrates_from("1", _upcast)
    return store, AgentTable({"ops": [v1, v2]}), s.hitl.tasks[0].call_uuid


def _told(store: SQLiteStore) -> list[tuple[str, list[str], list[Any]]]:
    return [
        (r.kind, [t["call_uuid"] for t in r.payload["tasks"]],
         [t["args"] for t in r.payload["tasks"]])
        for r in store.outbox.rows()
    ]  # fmt: skip


def test_a_migration_that_rewrites_a_call_tells_of_the_new_interrupt(tmp_path: Path) -> None:
    store, table, old = _paused(tmp_path)
    assert _told(store) == [("pending", [old], [{"service": "api"}])]
    with store.resume("t7") as s:  # what ``migrate ID --to 2`` does
        table.migrate(s, to="2")
    new = store.load("t7").hitl.tasks[0].call_uuid
    assert new == f"{old}.r1"
    told = _told(store)
    # the reviewer is told of the call that now waits, by its new UUID and new arguments
    assert ("pending", [new], [{"replicas": 3, "service": "api"}]) in told
    assert RAN == []


def test_an_approval_of_the_old_call_runs_nothing_and_the_effect_keeps_its_id(
    tmp_path: Path,
) -> None:
    store, table, old = _paused(tmp_path)
    effect = store.load("t7").traces["ops"].effect_ids[old]
    with store.resume("t7") as s:
        HITL.approve_all(s)  # approved before the migration: void after it
        table.migrate(s, to="2")
    with pytest.raises(InvalidDecisionError):
        decide_and_resume(store, "t7", lambda s: HITL.submit(s, old, HITLDecision.approve()),
                          table)  # fmt: skip
    out = decide_and_resume(store, "t7", lambda s: None, table)
    assert out.session.status == "pending" and RAN == []
    s = store.load("t7")
    assert s.traces["ops"].effect_ids == {f"{old}.r1": effect}
    out = decide_and_resume(store, "t7", HITL.approve_all, table)
    assert (out.session.status, RAN) == ("done", [("v2", "api", 3)])
    started = [e.target for e in store.audit("t7") if e.action == "effect.started"]
    assert len(started) == 1 and effect in started[0]


def test_an_agui_resume_naming_the_old_interrupt_is_refused(tmp_path: Path) -> None:
    from ag_ui import core as ag

    from intermission.agui.interrupts import Refusal, open_interrupts, plan

    store, table, old = _paused(tmp_path)
    with store.resume("t7") as s:
        table.migrate(s, to="2")
    s = store.load("t7")
    assert [i.id for i in open_interrupts(s)] == [f"{old}.r1"]
    entry = ag.ResumeEntry(interrupt_id=old, status="resolved", payload={"approved": True})
    with pytest.raises(Refusal) as refused:
        plan(s, [entry], None, time.time() * 1000)
    assert refused.value.code == "UNKNOWN_INTERRUPT"
    assert RAN == []


def test_a_widget_opened_before_the_migration_cannot_approve_the_old_row(
    tmp_path: Path,
) -> None:
    from intermission.notebook.hitl_panel import HITLPanel

    store, table, old = _paused(tmp_path)
    panel = HITLPanel(table, store.load("t7"), store=store)  # opened on the old call
    with store.resume("t7") as s:  # meanwhile, another process migrates it
        table.migrate(s, to="2")
    try:
        panel.approve(old)
    except Exception as exc:  # a refusal, typed or shown: either way nothing ran
        assert "intermission" in type(exc).__module__
    s = store.load("t7")
    assert (s.status, [t.call_uuid for t in s.hitl.tasks]) == ("pending", [f"{old}.r1"])
    assert s.hitl.decisions == {} and RAN == []
