"""A database written by schema version 1 (event log inside the snapshot) opens, loads and
resumes under version 2, and the next save moves the log to the events table."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import pg_dsn

from intermission import NodeStartEvent
from intermission.core.events_log import RunScope
from intermission.stores import SQLiteStore
from intermission.stores.sql import MIGRATIONS, SCHEMA_VERSION
from intermission.testing.conformance import paused_ops


def _version_1_schema(execute: Callable[..., Any], snapshot: str, int_type: str, real: str) -> None:
    execute("CREATE TABLE im_schema (version INTEGER NOT NULL)")
    for statement in MIGRATIONS[0]:
        execute(statement.format(int=int_type, real=real))
    execute("INSERT INTO im_schema (version) VALUES (1)")
    execute(
        "INSERT INTO im_sessions (id, version, status, agent, reason, tasks, deadline_ms, "
        "request, snapshot, updated_ms) VALUES ('old', 3, 'pending', 'ops', 'needs approval', "
        "'[]', NULL, 'null', ?, 1.0)".replace("?", "%s" if int_type == "BIGINT" else "?"),
        (snapshot,),
    )


def _version_1_store(kind: str, tmp_path: Path, snapshot: str) -> Any:
    if kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "v1.db", isolation_level=None)
        _version_1_schema(conn.execute, snapshot, "INTEGER", "REAL")
        conn.close()
        return SQLiteStore(tmp_path / "v1.db")
    import psycopg

    from intermission.stores.postgres import PostgresStore

    dsn = pg_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "DROP TABLE IF EXISTS im_sessions, im_ledger, im_events, im_audit, im_schema, "
            "im_outbox, im_outbox_told, im_settings"
        )
        _version_1_schema(conn.execute, snapshot, "BIGINT", "DOUBLE PRECISION")
    return PostgresStore(dsn)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_version_1_row_loads_resumes_and_moves_its_log(kind: str, tmp_path: Path) -> None:
    original = paused_ops("old")
    full = original.to_json()
    store = _version_1_store(kind, tmp_path, full)
    try:
        with store._tx("read") as run:
            assert run("SELECT MAX(version) FROM im_schema").fetchone()[0] == SCHEMA_VERSION == 10
            assert SCHEMA_VERSION == len(MIGRATIONS)
            assert run("SELECT COUNT(*) FROM im_events").fetchone()[0] == 0
        loaded = store.load("old")
        assert loaded.store_version == 3
        assert loaded.to_json() == full  # nothing lost in the upgrade
        assert [p.session_id for p in store.pending()] == ["old"]
        store.save(loaded)
        row = store.raw_row("old")
        assert row is not None and '"events"' not in row[8]  # the snapshot column
        events, count = row[12], row[13]  # the log's first chunk, added by version 2
        assert count == len(original.events) > 0 and events.startswith("[{")
        assert store.load("old").to_json() == full
        # a later save appends only the events it adds, as a chunk of im_events
        loaded = store.load("old")
        RunScope("r2", "ops", loaded).emit(NodeStartEvent, graph_id="g", node_id="n", node_kind="x")
        store.save(loaded)
        with store._tx("read") as run:
            parts = run("SELECT part, n FROM im_events WHERE session_id = 'old'").fetchall()
        assert parts == [(1, 1)]
        again = store.load("old")
        assert [e.seq for e in again.events] == [e.seq for e in loaded.events]
        assert len(again.events) == len(original.events) + 1
    finally:
        store.close()
