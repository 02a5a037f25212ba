"""Shared fixtures: ``make_store`` makes fresh stores of each kind (memory, SQLite, and
PostgreSQL at INTERMISSION_PG_DSN); shared helpers live in tests/_helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests._helpers import fresh_pg

from intermission.stores import MemoryStore, SQLiteStore

STORES = ["memory", "sqlite", "postgres"]


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
