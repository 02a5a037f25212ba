"""Stores written by every historic schema open and resume under this release (issue 40).

The fixtures (tests/legacy/fixtures, made by make_fixtures.py from the project's own
history, each by the old release's own code) hold a session paused on the approval of a
``delete_user`` call and a finished one. Each is opened here with the current store (a
copy of the SQLite file; the PostgreSQL dump replayed into a fresh schema), the pending
session listed, approved through ``decide_and_resume`` and resumed by the same agent
definition (tests/legacy/agents.py): the tool runs exactly once and the session is done.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tests._helpers import pg_dsn
from tests.legacy import agents

from intermission import HITL, StoreMigrationError, StoreSchemaError
from intermission.stores import PostgresStore, SQLiteStore, decide_and_resume, open_store
from intermission.stores import StoreMigrationError as FromStores
from intermission.stores.sql_schema import MIGRATIONS, SCHEMA_VERSION

FIXTURES = Path(__file__).parent / "fixtures"
INDEX: dict[str, Any] = json.loads((FIXTURES / "fixtures.json").read_text())
NAMES = sorted(INDEX)


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL schema (dropped afterwards) and a DSN whose search_path is it."""
    import psycopg

    dsn = pg_dsn()
    schema = f"legacy_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in dsn else "?"
    try:
        yield schema, f"{dsn}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _load_dump(name: str, schema: str) -> None:
    import psycopg

    sql = (FIXTURES / INDEX[name]["postgres"]).read_text().replace("__SCHEMA__", schema)
    with psycopg.connect(pg_dsn(), autocommit=True) as conn:
        conn.execute(sql)


def _sqlite_copy(name: str, tmp_path: Path) -> Path:
    path = tmp_path / INDEX[name]["sqlite"]
    shutil.copyfile(FIXTURES / INDEX[name]["sqlite"], path)
    return path


def _approve(session: Any) -> None:
    HITL.approve_all(session, reviewer="alice")


def _upgrade_and_resume(store: Any, name: str, call_key: str) -> None:
    """List, approve and resume the fixture's paused session: the tool runs once."""
    try:
        listed = store.pending()
        assert [p.session_id for p in listed] == ["paused"], name
        assert [t.call_uuid for t in listed[0].tasks] == INDEX[name][call_key]
        assert not listed.unreadable
        assert store.load("finished").status == "done"
        agent = agents.build_agent()
        before = len(agents.RUNS)
        outcome = decide_and_resume(store, "paused", _approve, agent)
        assert agents.RUNS[before:] == [1001], name  # the tool ran exactly once
        assert outcome.session.status == "done"
        assert "user 1001 deleted" in str(outcome.response.content)
        after = store.load("paused")
        assert after.status == "done"
        assert after.agent_fingerprint == agent.fingerprint  # the next run records today's
        assert list(store.pending()) == []
    finally:
        store.close()


@pytest.mark.parametrize("name", NAMES)
def test_sqlite_fixture_opens_and_resumes(name: str, tmp_path: Path) -> None:
    path = _sqlite_copy(name, tmp_path)
    _upgrade_and_resume(open_store(str(path), create=False), name, "paused_call")
    with sqlite3.connect(path) as conn:  # every migration recorded once, up to today's
        versions = [r[0] for r in conn.execute("SELECT version FROM im_schema ORDER BY 1")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


@pytest.mark.parametrize("name", NAMES)
def test_postgres_fixture_opens_and_resumes(name: str, pg_schema: tuple[str, str]) -> None:
    schema, dsn = pg_schema
    _load_dump(name, schema)
    _upgrade_and_resume(open_store(dsn, create=False), name, "postgres_paused_call")
    reopened = PostgresStore(dsn)  # a second open migrates nothing more
    try:
        with reopened._tx() as run:
            versions = [r[0] for r in run("SELECT version FROM im_schema ORDER BY 1")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
    finally:
        reopened.close()


def test_the_first_schema_upgrades_its_indexes(tmp_path: Path) -> None:
    """Migration 1 was rewritten after stores were made with it: the upgrade leaves the
    first layout's indexes behind and makes today's."""
    path = _sqlite_copy("schema1", tmp_path)
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        columns = {r[1] for r in conn.execute("PRAGMA table_info(im_sessions)")}
    assert {"im_sessions_pending", "im_sessions_pending_agent", "im_ledger_started"} <= names
    assert not {"im_sessions_status", "im_sessions_status_agent"} & names
    assert {"events", "family", "pending_since", "due_ms", "audit_seq"} <= columns


def test_a_newer_store_is_refused(tmp_path: Path) -> None:
    path = _sqlite_copy("schema8", tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO im_schema (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreSchemaError) as caught:
        SQLiteStore(path)
    assert caught.value.found == SCHEMA_VERSION + 1
    assert "newer" in str(caught.value) and "retry" not in str(caught.value)


def test_a_newer_postgres_store_is_refused(pg_schema: tuple[str, str]) -> None:
    schema, dsn = pg_schema
    _load_dump("schema8", schema)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO im_schema (version) VALUES (%s)", (SCHEMA_VERSION + 99,))
    with pytest.raises(StoreSchemaError):
        PostgresStore(dsn)


def test_a_failing_migration_is_named_and_changes_nothing(tmp_path: Path) -> None:
    """A statement the database refuses is a StoreMigrationError naming the migration and
    the statement (not 'the connection was lost … retry'); the store is left as it was."""
    path = _sqlite_copy("schema3", tmp_path)
    with sqlite3.connect(path) as conn:  # a trigger refuses migration 4's UPDATE
        conn.execute(
            "CREATE TRIGGER no_updates BEFORE UPDATE ON im_sessions "
            "BEGIN SELECT RAISE(ABORT, 'no updates here'); END"
        )
    with pytest.raises(StoreMigrationError) as caught:
        SQLiteStore(path)
    assert isinstance(caught.value, FromStores)
    assert caught.value.migration == 4 and "SET pending_since" in caught.value.statement
    assert "no updates here" in str(caught.value) and "migration 4" in str(caught.value)
    assert "retry" not in str(caught.value) and "lost" not in str(caught.value)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT MAX(version) FROM im_schema").fetchone()[0] == 3
        columns = {r[1] for r in conn.execute("PRAGMA table_info(im_sessions)")}
    assert "pending_since" not in columns  # rolled back with the rest


def test_a_failing_postgres_migration_is_named(pg_schema: tuple[str, str]) -> None:
    schema, dsn = pg_schema
    _load_dump("schema3", schema)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:  # a trigger refuses migration 4
        conn.execute(
            "CREATE FUNCTION no_updates() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'no updates here'; END $$ LANGUAGE plpgsql"
        )
        conn.execute(
            "CREATE TRIGGER no_updates BEFORE UPDATE ON im_sessions "
            "FOR EACH ROW EXECUTE FUNCTION no_updates()"
        )
    with pytest.raises(StoreMigrationError) as caught:
        PostgresStore(dsn)
    assert caught.value.migration == 4 and "no updates here" in str(caught.value)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT MAX(version) FROM im_schema").fetchone()[0] == 3


def test_concurrent_postgres_opens_migrate_once(pg_schema: tuple[str, str]) -> None:
    """Eight stores opening one old database at once: each migration is recorded once
    and every opener gets a working store."""
    schema, dsn = pg_schema
    _load_dump("schema1", schema)
    start = threading.Barrier(8)
    errors: list[BaseException] = []
    stores: list[Any] = []

    def open_one() -> None:
        start.wait()
        try:
            stores.append(PostgresStore(dsn))
        except BaseException as exc:  # (reported below, not lost in the thread)
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        with stores[0]._tx() as run:
            versions = [r[0] for r in run("SELECT version FROM im_schema ORDER BY 1")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        assert [p.session_id for p in stores[0].pending()] == ["paused"]
    finally:
        for store in stores:
            store.close()


def test_concurrent_postgres_opens_of_an_empty_database(pg_schema: tuple[str, str]) -> None:
    _, dsn = pg_schema
    start = threading.Barrier(6)
    outcomes: list[Any] = []

    def open_one() -> None:
        start.wait()
        try:
            store = PostgresStore(dsn)
            outcomes.append("ok")
            store.close()
        except BaseException as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == ["ok"] * 6
    store = PostgresStore(dsn)
    try:
        with store._tx() as run:
            versions = [r[0] for r in run("SELECT version FROM im_schema ORDER BY 1")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
    finally:
        store.close()


def test_every_migration_replays_on_todays_layout(tmp_path: Path) -> None:
    """Each migration may run again over what it made (the upgrade replays them all)."""
    store = SQLiteStore(tmp_path / "now.sqlite")
    try:
        with store._tx() as run:
            store._apply_migrations(run, 1)  # as if only the first were recorded
    finally:
        store.close()
    assert len(MIGRATIONS) >= SCHEMA_VERSION
