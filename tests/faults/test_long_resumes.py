"""Issue 13.5 / R40: claims are leases, renewed while their holder works and fenced.

Before: a resume longer than the lease (a slow tool) let a second resumer in, the tool ran
twice, and the first holder was told "nothing was run" although its tool had run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn
from tests.faults._helpers import EFFECT_KEY, approved_effect_session, lines, tally

from intermission import (
    HITL,
    FlowContext,
    FlowEngine,
    GraphSpec,
    HITLInterceptor,
    InMemoryAgentSession,
    LeaseLostError,
    NothingToResumeError,
    ReActAgent,
    ScriptedModel,
    SessionBusyError,
    ToolCall,
    tool,
)
from intermission.stores import MemoryStore, PostgresStore, SQLiteStore
from intermission.testing.workers import append_effect, effect_graph

SLOW_TRIALS = 10
LEASE_MS = 2000
TOOL_S = 5.0
"""The tool takes 2.5 leases. (A 1 s lease starved by a loaded machine — three test
processes on two cores — lapses for real: the fence then holds, the effect is not repeated,
but the resume is lost; what this test asks is that a live holder keeps its claim.)"""


def slow_agent(effect_file: Path) -> ReActAgent:
    """An agent whose approved tool takes TOOL_S seconds and is *not* ledgered: only the
    claim keeps a second resumer from running it again."""

    @tool
    def rebuild_index(name: str) -> str:
        """Rebuild a search index (slow)."""
        with effect_file.open("a") as f:
            f.write(f"{name}\n")
        time.sleep(TOOL_S)
        return f"rebuilt {name}"

    model = ScriptedModel(
        lambda messages, tools: (
            "Index rebuilt."
            if any(m.role == "tool" for m in messages)
            else [ToolCall("rebuild_index", {"name": "orders"})]
        )
    )
    return (
        ReActAgent.of(model).name("indexer").tools(rebuild_index)
        .interceptor(HITLInterceptor().on_tool("rebuild_index")).build()
    )  # fmt: skip


def test_a_resume_longer_than_the_lease_keeps_its_claim_and_its_tool_runs_once(
    make_store: Any, tmp_path: Path
) -> None:
    store = make_store(lease_ms=LEASE_MS)
    files = [tmp_path / f"tool-{i}.log" for i in range(SLOW_TRIALS)]
    for i in range(SLOW_TRIALS):
        s = InMemoryAgentSession.of(f"slow-{i}")
        slow_agent(files[i]).prompt("rebuild the orders index").session(s).call()
        HITL.approve_all(s, reviewer="alice")
        store.save(s)
    outcomes: dict[str, list[str]] = {f"slow-{i}": [] for i in range(SLOW_TRIALS)}

    def first(i: int) -> None:
        with store.resume(f"slow-{i}") as s:
            slow_agent(files[i]).prompt().session(s).call()
        outcomes[f"slow-{i}"].append("ran")

    def second(i: int) -> None:
        # once the first holds the claim and its tool runs (a head start of a fixed time is
        # not one on a loaded machine: the second would claim first and the first be refused)
        deadline = time.monotonic() + 60
        while not lines(files[i]) and time.monotonic() < deadline:
            time.sleep(0.02)
        while True:  # a second kernel that keeps trying while the first works
            try:
                with store.resume(f"slow-{i}") as s:
                    slow_agent(files[i]).prompt().session(s).call()
                outcomes[f"slow-{i}"].append("ran")
                return
            except SessionBusyError:
                outcomes[f"slow-{i}"].append("busy")
            except NothingToResumeError:
                outcomes[f"slow-{i}"].append("nothing to resume")
                return
            time.sleep(0.25)

    threads = [threading.Thread(target=f, args=(i,)) for i in range(SLOW_TRIALS)
               for f in (first, second)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for sid, seen in outcomes.items():
        assert seen.count("ran") == 1 and seen[-1] == "nothing to resume", (sid, seen)
        assert seen.count("busy") >= 5, seen  # refused all along the tool, not let in at 2 s
    ran = sum(lines(f) for f in files)
    assert ran == SLOW_TRIALS
    assert all(store.load(sid).status == "done" for sid in outcomes)
    refused = sum(seen.count("busy") for seen in outcomes.values())
    tally(f"{LEASE_MS / 1000:g} s lease, {TOOL_S:g} s tool", trials=SLOW_TRIALS, effects=ran,
          expected=SLOW_TRIALS, refused=refused)  # fmt: skip


@pytest.fixture
def two_holders(store_kind: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two resumers of one database: A cannot renew its claim (it stalls, its heartbeat is
    off), B is healthy. Both with a 0.4 s lease."""
    if store_kind == "memory":
        shared = MemoryStore(lease_ms=400)
        yield shared, shared
        shared.close()
        return
    if store_kind == "sqlite":
        path = tmp_path / "fence.db"
        a: Any = SQLiteStore(path, lease_ms=400, heartbeat=False)
        b: Any = SQLiteStore(path, lease_ms=400)
    else:
        fresh_pg().close()
        a = PostgresStore(pg_dsn(), lease_ms=400, heartbeat=False)
        b = PostgresStore(pg_dsn(), lease_ms=400)
    yield a, b
    a.close()
    b.close()


def _stalling_graph(effect_file: Path, stall_s: float, before: bool) -> GraphSpec:
    def stall(ctx: FlowContext) -> None:
        time.sleep(stall_s)

    effect = append_effect(str(effect_file))
    return effect_graph(effect, before=stall) if before else effect_graph(effect, after=stall)


@pytest.mark.parametrize("stall", ["after its effect", "before its effect"])
def test_a_holder_whose_lease_lapsed_cannot_save_nor_start_an_effect_and_says_what_ran(
    stall: str, two_holders: tuple[Any, Any], tmp_path: Path
) -> None:
    a_store, b_store = two_holders
    approved_effect_session(b_store, "f")
    effect_file = tmp_path / "effect.log"
    before = stall == "before its effect"
    errors: list[BaseException] = []
    if a_store is b_store:  # memory: one store object; A's claim is taken without renewal
        a_store.leases.enabled = False

    def holder_a() -> None:
        try:
            with a_store.resume("f") as s:
                FlowEngine().eval(_stalling_graph(effect_file, 1.0, before), s.context)
        except LeaseLostError as exc:
            errors.append(exc)

    a = threading.Thread(target=holder_a)
    a.start()
    time.sleep(0.6)  # A's lease (0.4 s) lapsed while it stalls
    b_store.leases.enabled = True
    with b_store.resume("f") as s:  # B takes over and finishes
        FlowEngine().eval(_stalling_graph(effect_file, 0.0, before), s.context)
    a.join(10)
    (error,) = errors
    assert lines(effect_file) == 1  # never twice, whoever ran it
    final = b_store.load("f")
    assert final.status == "done" and final.ledger[EFFECT_KEY].status == "completed"
    if before:  # A never started the effect: refused at once() (fenced)
        assert error.ran == [] and "no tool call and no effect" in str(error)
    else:  # A ran it; B got the recorded result; A is told the truth
        assert error.ran == [f"effect {EFFECT_KEY!r} completed"]
        assert f"effect {EFFECT_KEY!r} completed" in str(error)
    tally(f"lease lapsed {stall}", trials=1, effects=lines(effect_file), expected=1, refused=1)
