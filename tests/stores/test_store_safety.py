"""Fuzzed snapshots only give typed errors; pending() uses its index at 100,000 rows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import json_paths

from intermission import IntermissionError
from intermission.stores import MemoryStore, SQLiteStore
from intermission.testing.conformance import paused_ops

BASE = paused_ops("fuzz").to_json()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["truncate", "byte", "replace", "delete", "version"]))
    if kind == "truncate":
        return BASE[: draw(st.integers(0, len(BASE) - 1))]
    if kind == "byte":
        i = draw(st.integers(0, len(BASE) - 1))
        return BASE[:i] + draw(st.characters(codec="utf-8")) + BASE[i + 1 :]
    data = json.loads(BASE)
    path = draw(st.sampled_from(json_paths(data)[1:]))
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    if kind == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif kind == "version":
        data["schema_version"] = draw(st.integers(-3, 10) | st.text(max_size=3))
    else:
        parent[path[-1]] = draw(json_values)
    return json.dumps(data)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_fuzzed_snapshots_give_typed_errors_and_leave_the_row_unchanged(
    kind: str, tmp_path: Path
) -> None:
    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "f.db")
    store.put_snapshot(BASE)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=mutated())
    def check(text: str) -> None:
        before = store.raw_row("fuzz")
        try:
            store.put_snapshot(text, version=before[1])
        except IntermissionError:
            assert store.raw_row("fuzz") == before
            return
        # a mutation that is still a valid snapshot is stored like any other
        assert store.load(json.loads(text)["session_id"]) is not None

    check()
    store.close()


def test_pending_first_page_uses_the_index_at_100k_sessions(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "big.db", synchronous="NORMAL")
    snapshot = paused_ops("x").to_json()
    rows = [
        (
            f"s{i:06d}", 1, "pending" if i % 3 == 0 else "done", "ops" if i % 2 else "change",
            "why", "[]", None, "null", snapshot, float(i), float(i),
        )
        for i in range(100_000)
    ]  # fmt: skip
    with store._tx() as run:
        cur = run("SELECT 1")
        cur.executemany(
            "INSERT INTO im_sessions (id, version, status, agent, reason, tasks, deadline_ms, "
            "request, snapshot, updated_ms, pending_since) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    assert store.count() == 100_000
    for agent, index in ((None, "im_sessions_pending"), ("ops", "im_sessions_pending_agent")):
        plan = " | ".join(store.explain_pending(50, agent))
        assert f"USING INDEX {index}" in plan or f"USING COVERING INDEX {index}" in plan, plan
        # a scan of the partial index in its own order (LIMIT stops it early) is fine; a scan
        # of the table, or a sort, is not
        assert not re.search(r"SCAN im_sessions(?! USING)", plan) and "TEMP B-TREE" not in plan, (
            plan
        )
    page = store.pending(limit=50)
    assert [p.session_id for p in page[:2]] == ["s099999", "s099996"] and len(page) == 50
    store.close()
