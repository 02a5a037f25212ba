"""Store fixtures: memory, SQLite and PostgreSQL (INTERMISSION_PG_DSN)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from intermission.stores import MemoryStore, SQLiteStore

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_DSN = os.environ.get("INTERMISSION_PG_DSN")
STORES = ["memory", "sqlite", "postgres"]


def pg_dsn() -> str:
    """The test database, or a skip locally / a failure under CI=true."""
    if PG_DSN:
        return PG_DSN
    msg = "PostgreSQL tests need INTERMISSION_PG_DSN (bash .ci/postgres.sh sets one up)"
    if IN_CI:
        pytest.fail(msg + "; CI=true: a missing PostgreSQL fails the run")
    pytest.skip(msg + " (CI=true would fail instead)")


def fresh_pg(**kw: Any) -> Any:
    from intermission.stores.postgres import PostgresStore

    store = PostgresStore(pg_dsn(), **kw)
    with store._tx() as run:
        run("DELETE FROM im_ledger")
        run("DELETE FROM im_events")
        run("DELETE FROM im_sessions")
    return store


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, tmp_path: Any) -> Iterator[Callable[..., Any]]:
    opened: list[Any] = []

    def make(**kw: Any) -> Any:
        if store_kind == "memory":
            store: Any = MemoryStore(**kw)
        elif store_kind == "sqlite":
            store = SQLiteStore(tmp_path / f"s{len(opened)}.db", **kw)
        else:
            store = fresh_pg(**kw)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
