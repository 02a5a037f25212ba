"""Issue 13.7 / R40: a second resumer is told there is nothing to resume.

Before: ``with store.resume(id)`` and ``FlowEngine().eval`` on a finished session silently
"succeeded" doing nothing — four processes approving one change: one ran, three reported
success.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn
from tests.faults._helpers import approved_effect_session, lines, tally

from intermission import FlowEngine, NothingToResumeError
from intermission.stores import open_store
from intermission.testing.conformance import paused_change
from intermission.testing.workers import effect_graph, resume_change, resume_effect


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as p:
        yield p


def _target(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "done.db")
    fresh_pg().close()
    return pg_dsn()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_four_processes_resuming_a_finished_session_are_all_refused(
    kind: str, tmp_path: Path, pool: Any
) -> None:
    target = _target(kind, tmp_path)
    store = open_store(target)
    change = paused_change("change-done")
    change.context.put("approval.decision", "APPROVE")
    store.save(change)
    first = tmp_path / "first.log"
    assert resume_change(target, "change-done", str(first)) == "ran" and lines(first) == 1
    approved_effect_session(store, "effect-done")
    assert resume_effect(target, "effect-done", str(first)) == "ran" and lines(first) == 2
    before = (store.raw_row("change-done"), store.raw_row("effect-done"))
    late = tmp_path / "late.log"
    results = pool.starmap(resume_change, [(target, "change-done", str(late))] * 4)
    results += pool.starmap(resume_effect, [(target, "effect-done", str(late))] * 4)
    assert results == ["NothingToResumeError"] * 8
    assert lines(late) == 0
    after = (store.raw_row("change-done"), store.raw_row("effect-done"))
    assert after == before  # refused before claiming: not even a claim was written
    # the engine refuses a finished context too, whoever drives it
    with pytest.raises(NothingToResumeError):
        FlowEngine().eval(effect_graph(lambda cid: "never"), store.load("effect-done").context)
    store.close()
    tally(f"4 processes resume a finished session ({kind})", trials=8, effects=lines(late),
          expected=0, refused=8)  # fmt: skip
