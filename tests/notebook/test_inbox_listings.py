"""Issue 27.4 in the notebook Inbox: a row that cannot be read is named (with why) under the
table and never hides the others; a session stuck on an effect of unknown outcome is
listed as needing a person; and ``[expired]`` is judged by the store's clock. Before, one
damaged row made the Inbox raise, and stuck sessions were not shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._helpers import need_module

need_module("ipywidgets", "the notebook extra (pip install 'intermission[notebook]')")

from tests.faults._race_agents import DEADLINE_MS, ops_agent  # noqa: E402
from tests.stores.test_listings import crashed_mid_effect, damage, paused_threads  # noqa: E402

from intermission import FakeClock, InMemoryAgentSession  # noqa: E402
from intermission.examples import build_change_graph, build_ops_agent  # noqa: E402
from intermission.notebook import Inbox  # noqa: E402
from intermission.stores import MemoryStore, SQLiteStore  # noqa: E402
from intermission.testing.conformance import paused_change  # noqa: E402


def test_the_inbox_names_unreadable_rows_and_stuck_sessions(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        ids = paused_threads(store, 30)
        damage(store, ids[4], "cut")
        damage(store, ids[9], "tasks")
        store.save(paused_change("stuck"))
        crashed_mid_effect(store, "stuck")
        inbox = Inbox(store, {"ops": build_ops_agent, "change": build_change_graph}, poll_s=None)
        listed = set(inbox.pending_ids)
        assert listed == (set(ids) | {"stuck"}) - {ids[4], ids[9]}
        problems = inbox.problems
        assert f"unreadable: {ids[4]}: its stored snapshot is" in problems
        assert f"unreadable: {ids[9]}: tasks: the stored tasks" in problems
        assert "needs a person: stuck: effect &#x27;change-001/execute&#x27; started" in problems
    finally:
        store.close()


@pytest.mark.parametrize("advance", [0.0, DEADLINE_MS])
def test_the_inbox_marks_expired_by_the_stores_clock(advance: float) -> None:
    clock = FakeClock(start_ms=1_000_000.0, step_ms=0)
    store = MemoryStore(clock=clock)
    store.save(InMemoryAgentSession("late"))
    with store.claim("late") as s:
        ops_agent().prompt("delete 1001").session(s).call()
    clock.advance(advance)
    inbox = Inbox(store, {"ops": ops_agent}, poll_s=None)
    assert ("expired" in inbox.table) == (advance >= DEADLINE_MS)
