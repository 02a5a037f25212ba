"""A closed store raises StoreClosedError and opens nothing again (issue 21, R51): a SQLite
store used after close() never re-creates its deleted database file."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._helpers import fresh_pg

from intermission import InMemoryAgentSession, StoreClosedError, StoreError
from intermission.stores import SQLiteStore


def _saved(store: object) -> str:
    session = InMemoryAgentSession.of("closed-1")
    session.context.put("k", 1)
    store.save(session)  # type: ignore[attr-defined]
    return session.session_id


@pytest.mark.parametrize("call", ["load", "pending", "save", "resume"])
def test_a_closed_sqlite_store_raises_and_never_recreates_its_deleted_file(
    tmp_path: Path, call: str
) -> None:
    path = tmp_path / "gone.sqlite"
    store = SQLiteStore(path)
    sid = _saved(store)
    store.close()
    for leftover in tmp_path.glob("gone.sqlite*"):
        leftover.unlink()
    with pytest.raises(StoreClosedError, match="closed"):
        if call == "load":
            store.load(sid)
        elif call == "pending":
            store.pending()
        elif call == "save":
            store.save(InMemoryAgentSession.of("closed-2"))
        else:
            with store.resume(sid):
                pass
    assert list(tmp_path.iterdir()) == []  # nothing re-created
    assert issubclass(StoreClosedError, StoreError)


def test_a_closed_postgres_store_raises_store_closed_error() -> None:
    store = fresh_pg()
    sid = _saved(store)
    store.close()
    with pytest.raises(StoreClosedError):
        store.load(sid)
