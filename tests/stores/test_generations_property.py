"""Compare-and-set covers the generation (R29, R48; adversary repro 05), for any
interleaving: copies of a session are loaded, changed and saved late while the session is
deleted and saved anew under its id (a new generation, minted family), or put back from a
snapshot of before families (no family). A save is accepted exactly when the copy's version
is the stored one and the copy is of the stored generation (a row of no family takes any
copy of its version, as before); every refusal is a ConflictError that writes nothing."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intermission import ConflictError, InMemoryAgentSession

OPS = st.lists(
    st.one_of(
        st.just(("load", 0)),
        st.tuples(st.just("save"), st.integers(0, 5)),
        st.just(("delete", 0)),
        st.just(("new", 0)),
        st.just(("old", 0)),
        st.tuples(st.just("put_back"), st.integers(0, 5)),
    ),
    min_size=1,
    max_size=14,
)


def test_a_save_is_accepted_exactly_when_version_and_generation_match(make_store: Any) -> None:
    store = make_store()
    ids = itertools.count()

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(ops=OPS)
    def check(ops: list[tuple[str, int]]) -> None:
        sid = f"g{next(ids)}"
        row: tuple[str | None, int] | None = None  # the model: (family, version)
        copies: list[InMemoryAgentSession] = []
        marks = itertools.count()
        for op, n in ops:
            if op == "load" and row is not None:
                copies.append(store.load(sid))
            elif op == "delete":
                store.delete(sid)
                row = None
            elif op in ("new", "old") and row is None:
                fresh = InMemoryAgentSession.of(sid)
                if op == "old":  # a snapshot from before families were minted
                    data = json.loads(fresh.to_json())
                    data.pop("family")
                    store.put_snapshot(data)
                else:
                    store.save(fresh)
                row = (None if op == "old" else fresh.family, 1)
            elif op in ("save", "put_back") and copies:
                copy = copies[n % len(copies)]
                copy.context.put("mark", next(marks))
                fits = (
                    row is not None
                    and copy.store_version == row[1]
                    and (row[0] is None or row[0] == copy.ledger_id)
                )
                before = store.raw_row(sid)
                try:
                    if op == "save":
                        store.save(copy)
                    else:  # an explicit restore at the version it was loaded at
                        store.put_snapshot(copy.to_json(), version=copy.store_version)
                        copy.store_version += 1
                except ConflictError:
                    assert not fits, (op, copy.family, row)
                    assert store.raw_row(sid) == before  # nothing written
                    continue
                assert fits, (op, copy.family, row)
                assert row is not None
                row = (copy.family if row[0] is None else row[0], row[1] + 1)
                assert store.load(sid).context["mark"] == copy.context["mark"]

    check()
