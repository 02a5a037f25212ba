"""Issue 27.5: pages of ``store.pending()`` are keyed on when a session became pending, which
saves while it stays pending keep. Before, the key was ``updated_ms``: a thread decided in
part (one approval of two, the other still open) moved to the front while a reader paged
on, and a full pass skipped it (SQLite 20 of 55, PostgreSQL 22 of 45). Here a full pass,
made while other threads are inserted, deleted and partly decided, sees every thread that
stays open exactly once. (``GET /interrupts`` and its cursor: tests/agui/test_listings.py.)"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from tests._helpers import fresh_pg
from tests.stores._threads import THREADS, decide_one, paused_pairs

from intermission.stores import MemoryStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    kind = request.param
    made: Any = (
        MemoryStore()
        if kind == "memory"
        else SQLiteStore(tmp_path / "p.db", synchronous="NORMAL")
        if kind == "sqlite"
        else fresh_pg()
    )
    yield made
    made.close()


def test_a_full_pass_sees_every_thread_that_stays_open_exactly_once(store: Any) -> None:
    rng = random.Random(27)
    steady = [f"s{i:05d}" for i in range(THREADS)]
    churn = [f"c{i:05d}" for i in range(THREADS // 10)]
    paused_pairs(store, steady + churn)
    seen: Counter[str] = Counter()
    born = 0
    page = store.pending(limit=50)
    while page:
        seen.update(p.session_id for p in page)
        # meanwhile: steady threads decided in part (they stay open), new threads paused,
        # others deleted or decided in part too
        for sid in rng.sample(steady, 6):
            decide_one(store, sid)
        paused_pairs(store, [f"n{born:05d}", f"n{born + 1:05d}"])
        born += 2
        if churn:
            store.delete(churn.pop(rng.randrange(len(churn))))
        if churn:
            decide_one(store, rng.choice(churn))
        page = store.pending(limit=50, before=page[-1])
    missing = [sid for sid in steady if seen[sid] == 0]
    twice = [sid for sid in steady if seen[sid] > 1]
    assert not missing and not twice, (len(missing), missing[:5], twice[:5])
    assert all(n == 1 for n in seen.values())  # nothing, new or old, is listed twice
