"""A database written by schema version 1 (event log inside the snapshot) opens, loads and
resumes under version 2, and the next save moves the log to its own column."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from intermission.stores import SQLiteStore
from intermission.stores.sql import MIGRATIONS, SCHEMA_VERSION
from intermission.testing.conformance import paused_ops


def _version_1_database(path: Path, snapshot: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE im_schema (version INTEGER NOT NULL)")
    for statement in MIGRATIONS[0]:
        conn.execute(statement.format(int="INTEGER", real="REAL"))
    conn.execute("INSERT INTO im_schema (version) VALUES (1)")
    conn.execute(
        "INSERT INTO im_sessions (id, version, status, agent, reason, tasks, deadline_ms, "
        "request, snapshot, updated_ms) VALUES ('old', 3, 'pending', 'ops', 'needs approval', "
        "'[]', NULL, 'null', ?, 1.0)",
        (snapshot,),
    )
    conn.close()


def test_a_version_1_row_loads_resumes_and_moves_its_log(tmp_path: Path) -> None:
    original = paused_ops("old")
    full = original.to_json()
    _version_1_database(tmp_path / "v1.db", full)
    store = SQLiteStore(tmp_path / "v1.db")
    try:
        with store._tx("read") as run:
            assert run("SELECT MAX(version) FROM im_schema").fetchone()[0] == SCHEMA_VERSION == 2
            assert run("SELECT events FROM im_sessions WHERE id = 'old'").fetchone()[0] is None
        loaded = store.load("old")
        assert loaded.store_version == 3
        assert loaded.to_json() == full  # nothing lost in the upgrade
        assert [p.session_id for p in store.pending()] == ["old"]
        store.save(loaded)
        row = store.raw_row("old")
        assert row is not None
        snapshot, events, count = row[8], row[12], row[13]  # columns added by version 2 last
        assert '"events"' not in snapshot and count == len(original.events) > 0
        assert events.startswith("[{") and store.load("old").to_json() == full
    finally:
        store.close()
