"""Agent versions in the stores (R62): ``pending(version=)`` and ``versions()`` on every
store, the ``agent_version`` column migration 9 adds (backfilled from the snapshots of a
store written at schema 8), and the labels listings show."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import pg_dsn

from intermission import InMemoryAgentSession, UsageError
from intermission.stores import PendingSession, SQLiteStore, VersionCount, sql_schema
from intermission.stores.listings import version_filter, version_label
from intermission.stores.sql import MIGRATIONS, SCHEMA_VERSION
from intermission.testing.conformance import paused_ops

Made = Callable[..., Any]


def waiting(sid: str, agent: str | None, version: str | None, pending: bool = True) -> Any:
    """A session of ``agent`` at ``version``, pending (or done)."""
    s = InMemoryAgentSession.of(sid)
    s.agent, s.agent_version = agent, version
    if pending:
        s.pending(True, f"{sid} waits")
    else:
        s.status = "done"
    return s


MIX = [
    ("a1", "ops", "1"), ("a2", "ops", "1"), ("a3", "ops", "2"), ("a4", "billing", "1"),
    ("a5", "billing", None), ("a6", None, None), ("a7", "ops", "3f2a9c0d1e5b7a64"),
]  # fmt: skip


def _fill(store: Any) -> None:
    for sid, agent, version in MIX:
        store.save(waiting(sid, agent, version))
    store.save(waiting("done1", "ops", "1", pending=False))  # not pending: never listed


def ids(page: list[PendingSession]) -> list[str]:
    return [p.session_id for p in page]


def test_pending_filters_by_agent_version(make_store: Made) -> None:
    store = make_store()
    _fill(store)
    assert ids(store.pending(version="ops@1")) == ["a2", "a1"]
    assert ids(store.pending(agent="ops", version="1")) == ["a2", "a1"]
    assert ids(store.pending(version="1")) == ["a4", "a2", "a1"]  # of any agent
    assert ids(store.pending(version="billing@1")) == ["a4"]
    assert ids(store.pending(version="ops@3f2a9c0d1e5b7a64")) == ["a7"]  # a fingerprint
    assert ids(store.pending(version="ops@9")) == []
    assert ids(store.pending(version="nobody@1")) == []
    page = store.pending(version="ops@1")
    assert [(p.agent, p.agent_version, p.version_label) for p in page] == [
        ("ops", "1", "ops@1")
    ] * 2
    labels = {p.session_id: p.version_label for p in store.pending()}
    assert labels == {
        "a1": "ops@1", "a2": "ops@1", "a3": "ops@2", "a4": "billing@1", "a5": "billing",
        "a6": "?", "a7": "ops@3f2a9c0d1e5b7a64",
    }  # fmt: skip
    # paging within a version: newest first, nothing skipped or repeated
    first = store.pending(limit=1, version="ops@1")
    rest = store.pending(limit=5, version="ops@1", before=first.last)
    assert ids(first) + ids(rest) == ["a2", "a1"]


def test_versions_counts_the_paused_sessions_per_agent_version(make_store: Made) -> None:
    store = make_store()
    assert store.versions() == []
    _fill(store)
    since = {p.session_id: p.pending_since for p in store.pending()}
    found = store.versions()
    assert all(isinstance(v, VersionCount) for v in found)
    got = {(v.agent, v.version): (v.count, v.oldest_ms) for v in found}
    assert got == {
        ("ops", "1"): (2, min(since["a1"], since["a2"])),
        ("ops", "2"): (1, since["a3"]),
        ("ops", "3f2a9c0d1e5b7a64"): (1, since["a7"]),
        ("billing", "1"): (1, since["a4"]),
        ("billing", None): (1, since["a5"]),
        (None, None): (1, since["a6"]),
    }
    # by agent (no agent last), then the version waiting longest first
    assert [v.agent for v in found] == ["billing", "billing", "ops", "ops", "ops", None]
    ops = [v for v in found if v.agent == "ops"]
    assert [v.oldest_ms for v in ops] == sorted(v.oldest_ms for v in ops)
    assert {v.label for v in found} >= {"ops@1", "billing", "?"}


def test_versions_counts_sessions_stopped_otherwise_pinned_to_their_version(
    make_store: Made,
) -> None:
    # a session stopped by a step budget or an error (paused, failed) resumes on its own
    # version too: retiring that version would strand it, so versions() counts it
    store = make_store()
    store.save(waiting("p1", "ops", "1"))
    for sid, status in (("s1", "paused"), ("s2", "failed"), ("s3", "done")):
        s = waiting(sid, "ops", "0" if sid != "s1" else "1", pending=False)
        s.status = status
        store.save(s)
    got = {(v.agent, v.version): v.count for v in store.versions()}
    assert got == {("ops", "1"): 2, ("ops", "0"): 1}
    (one,) = [v for v in store.versions() if v.version == "1"]
    assert one.oldest_ms <= store.pending()[0].pending_since


def test_a_decided_or_moved_session_leaves_its_version(make_store: Made) -> None:
    store = make_store()
    _fill(store)
    s = store.load("a1")
    s.pending(False, None)
    s.status = "done"
    store.save(s)
    moved = store.load("a2")  # migrated to version 2 (as a resume under R62 does), still paused
    since = store.pending(version="ops@1")[0].pending_since
    moved.agent_version = "2"
    store.save(moved)
    assert ids(store.pending(version="ops@1")) == []
    # (it stayed pending: it keeps its place, older than a3)
    assert ids(store.pending(version="ops@2")) == ["a3", "a2"]
    assert store.pending(version="ops@2")[-1].pending_since == since
    counts = {v.label: v.count for v in store.versions()}
    assert "ops@1" not in counts and counts["ops@2"] == 2
    store.delete("a3")
    store.delete("a2")
    assert "ops@2" not in {v.label for v in store.versions()}


def test_an_agent_name_may_hold_an_at_sign(make_store: Made) -> None:
    store = make_store()
    store.save(waiting("m1", "team@eu", "2"))
    assert ids(store.pending(version="team@eu@2")) == ["m1"]
    assert [v.label for v in store.versions()] == ["team@eu@2"]


@pytest.mark.parametrize(
    "bad",
    ["", "@", "ops@", "@1", "a@b@"],
)
def test_a_malformed_version_is_refused(make_store: Made, bad: str) -> None:
    store = make_store()
    with pytest.raises(UsageError, match="AGENT@VERSION"):
        store.pending(version=bad)


def test_a_version_naming_another_agent_than_agent_is_refused(make_store: Made) -> None:
    store = make_store()
    with pytest.raises(UsageError, match="names agent 'ops'"):
        store.pending(agent="billing", version="ops@1")
    with pytest.raises(UsageError, match="version is a str"):
        store.pending(version=1)


def test_version_filter_and_label() -> None:
    assert version_filter(None) == (None, None)
    assert version_filter(None, "ops") == ("ops", None)
    assert version_filter("ops@2") == ("ops", "2")
    assert version_filter("2") == (None, "2")
    assert version_filter("2", "ops") == ("ops", "2")
    assert version_filter("ops@2", "ops") == ("ops", "2")
    assert version_filter("a@b@2") == ("a@b", "2")
    assert version_label("ops", "2") == "ops@2"
    assert version_label("ops", None) == "ops"
    assert version_label(None, "2") == "?@2"
    assert version_label(None, None) == "?"
    assert PendingSession("x", "ops", None).version_label == "ops"  # (built without one)
    assert VersionCount("ops", "2", 3, 1.0).label == "ops@2"


AGENTS = st.sampled_from(["ops", "billing", None])
VERSIONS = st.sampled_from(["1", "2", None])
SESSIONS = st.lists(st.tuples(AGENTS, VERSIONS, st.booleans()), max_size=12)


def test_listings_hold_for_any_mix_of_sessions(make_store: Made) -> None:
    store = make_store()
    round_no = iter(range(10**6))

    @settings(
        max_examples=25, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )  # fmt: skip
    @given(mix=SESSIONS)
    def check(mix: list[tuple[str | None, str | None, bool]]) -> None:
        n = next(round_no)
        made = [f"h{n}-{i}" for i in range(len(mix))]
        for sid, (agent, version, pending) in zip(made, mix, strict=True):
            store.save(waiting(sid, agent, version, pending))
        try:
            paused = [(a, v) for a, v, p in mix if p]
            counts = Counter(paused)
            listed = store.versions()
            assert {(c.agent, c.version): c.count for c in listed} == dict(counts)
            assert len(listed) == len(counts)
            for (agent, version), n_paused in counts.items():
                if version is None:
                    continue  # (no filter names an unversioned session)
                label = version_label(agent, version)
                if agent is not None:
                    assert len(store.pending(version=label, limit=50)) == n_paused
                by_version = sum(c for (_, v), c in counts.items() if v == version)
                assert len(store.pending(version=version, limit=50)) == by_version
        finally:
            for sid in made:
                store.delete(sid)

    check()


# -- migration 9 on a store written at schema 8 -------------------------------------------


def _schema_8(execute: Callable[..., Any], store_class: Any, mark: str) -> None:
    """The tables as migrations 1..8 left them (what the landed code before 9 wrote)."""
    execute("CREATE TABLE im_schema (version INTEGER NOT NULL)")
    for n, statements in enumerate(MIGRATIONS[:8], start=1):
        for statement in statements:
            execute(
                statement.format(
                    int=store_class.int_type, real=store_class.real_type, cover=store_class.cover
                )
            )
        execute(f"INSERT INTO im_schema (version) VALUES ({mark})", (n,))


def _old_rows(execute: Callable[..., Any], mark: str) -> dict[str, str | None]:
    """Rows as schema 8 kept them; returns each row's expected agent_version."""
    rows: dict[str, tuple[str, str | None]] = {}
    for sid, version in [("v1", "1"), ("v2", "2"), ("v3", "1"), ("fp", "3f2a9c0d1e5b7a64")]:
        s = paused_ops(sid)
        s.agent_version = version
        rows[sid] = (s.to_json(), version)
    before = paused_ops("none")
    before.agent_version = before.release = None  # from before versions: NULL
    rows["none"] = (before.to_json(), None)
    # a row whose context names an agent_version: only the top-level key counts
    s = paused_ops("nested")
    s.agent_version = s.release = None
    s.context.put("agent_version", "not-this")
    rows["nested"] = (s.to_json(), None)
    # a row cut short: unreadable, keeps NULL (its load reports it), the migration goes on
    cut = paused_ops("cut")
    cut.agent_version = "1"
    rows["cut"] = (cut.to_json()[:300], None)
    assert '"agent_version":"1"' in rows["cut"][0]  # (what the backfill looks for, unparsable)
    for since, (sid, (text, _)) in enumerate(rows.items(), start=1):
        execute(
            "INSERT INTO im_sessions (id, version, status, agent, reason, tasks, deadline_ms, "
            "request, snapshot, updated_ms, pending_since, audit_seq) "
            f"VALUES ({mark}, 1, 'pending', 'ops', 'r', '[]', NULL, 'null', {mark}, 1.0, "
            f"{mark}, 0)",
            (sid, text, float(since)),
        )
    return {sid: version for sid, (_, version) in rows.items()}


def _store_at_schema_8(
    kind: str, tmp_path: Path
) -> tuple[Callable[[], Any], dict[str, str | None]]:
    """A database at schema 8 with rows, and how to open it with this intermission."""
    if kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "v8.db", isolation_level=None)
        _schema_8(conn.execute, SQLiteStore, "?")
        expected = _old_rows(conn.execute, "?")
        conn.close()
        return lambda: SQLiteStore(tmp_path / "v8.db"), expected
    import psycopg

    from intermission.stores.postgres import PostgresStore

    dsn = pg_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "DROP TABLE IF EXISTS im_sessions, im_ledger, im_events, im_audit, im_schema, "
            "im_outbox, im_outbox_told, im_settings"
        )
        _schema_8(conn.execute, PostgresStore, "%s")
        expected = _old_rows(conn.execute, "%s")
    return lambda: PostgresStore(dsn), expected


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("batch", [200, 2])
def test_migration_9_backfills_the_agent_version_from_the_snapshots(
    kind: str, batch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_schema, "_BATCH", batch)  # (2: the backfill goes in batches)
    open_it, expected = _store_at_schema_8(kind, tmp_path)
    store = open_it()
    try:
        with store._tx("read") as run:
            assert run("SELECT MAX(version) FROM im_schema").fetchone()[0] == SCHEMA_VERSION == 10
            stored = dict(run("SELECT id, agent_version FROM im_sessions").fetchall())
        assert stored == expected
        assert ids(store.pending(version="ops@1")) == ["v3", "v1"]
        assert ids(store.pending(version="3f2a9c0d1e5b7a64")) == ["fp"]
        counts = {v.label: v.count for v in store.versions()}
        assert counts == {"ops@1": 2, "ops@2": 1, "ops@3f2a9c0d1e5b7a64": 1, "ops": 3}
        loaded = store.load("v2")
        assert loaded.agent_version == "2"  # the snapshot's own, unchanged
        loaded.agent_version = "3"  # later saves write the column
        store.save(loaded)
        assert ids(store.pending(version="ops@3")) == ["v2"]
    finally:
        store.close()
    # opened again: migrated once, nothing run twice
    again = open_it()
    try:
        with again._tx("read") as run:
            versions = [v for (v,) in run("SELECT version FROM im_schema ORDER BY version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
    finally:
        again.close()


def test_a_sqlite_store_explains_a_version_page_on_its_index(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "q.db")
    try:
        sql, params = store.pending_query(50, "ops", None, "1")
        with store._tx("read") as run:
            plan = " ".join(str(r) for r in run(f"EXPLAIN QUERY PLAN {sql}", params).fetchall())
            grouped = run(
                "EXPLAIN QUERY PLAN SELECT agent, agent_version, COUNT(*), MIN(pending_since) "
                "FROM im_sessions WHERE status = 'pending' GROUP BY agent, agent_version"
            ).fetchall()
        assert "im_sessions_pending_version" in plan and "TEMP B-TREE" not in plan
        assert "im_sessions_pending_version" in " ".join(str(r) for r in grouped)
    finally:
        store.close()
