"""The audit trail across processes and by hand: restarts, the CLI, tampering in SQLite and
PostgreSQL, several writers at once, an approved tool's effect, and any interleaving of
saves, appends, forks and deletes (issue 28)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import fresh_pg, pg_dsn

from intermission import HITL, HITLDecision, InMemoryAgentSession
from intermission.audit import AuditEntry, note, noted
from intermission.cli import main
from intermission.errors import ConflictError
from intermission.examples import build_ops_agent
from intermission.stores import MemoryStore, SQLiteStore

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
GENESIS = "0" * 64
WRITERS = int(os.environ.get("IM_AUDIT_WRITERS", 4))
ROUNDS = int(os.environ.get("IM_AUDIT_ROUNDS", 12))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=ENV, timeout=120,
    )  # fmt: skip


def script(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, cwd=cwd, env=ENV, timeout=300,
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL another process can open: a SQLite file or the (emptied) test database."""
    if request.param == "sqlite":
        yield str(tmp_path / "audit.sqlite")
    else:
        fresh_pg().close()
        yield pg_dsn()


def _sql(target: str) -> Callable[..., list[tuple[Any, ...]]]:
    """Run SQL on the store's database directly, as someone with write access would."""

    def run(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if target.startswith("postgresql://"):
            import psycopg

            with psycopg.connect(target, autocommit=True) as conn:
                cur = conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
                return list(cur.fetchall()) if cur.description else []
        conn = sqlite3.connect(target, isolation_level=None)
        try:
            return list(conn.execute(sql, params).fetchall())
        finally:
            conn.close()

    return run


def _own_hash(prev: str, fields: dict[str, Any]) -> str:
    """The documented formula, with json and hashlib alone."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev + text).encode("utf-8")).hexdigest()


# -- restarts: written by some processes, checked by another ------------------------------
WRITE_TRAIL = """
    import sys
    from intermission import InMemoryAgentSession
    from intermission.audit import AuditEntry, note
    from intermission.examples import build_change_graph
    from intermission.stores import open_store

    store = open_store(sys.argv[1])
    if sys.argv[2] == "first":
        s = InMemoryAgentSession.of("t")
        build_change_graph().prompt("Upgrade").session(s).call()
        store.save(s)
        with store.resume("t") as s:
            note(s, AuditEntry(action="decision.recorded", actor="alice", via="cli",
                               reason="planned window", detail={"verdict": "APPROVE"}))
            s.context.put("approval.decision", "APPROVE")
            store.save(s)  # the decision first, then what it set off
            build_change_graph().prompt().session(s).call()
        store.fork("t", "t-fork", 0)
    else:
        store.append_audit("t", [AuditEntry(action="decision.refused", actor="mallory",
                                            reason="not in role sre")])
        f = store.load("t-fork")
        note(f, AuditEntry(action="decision.recorded", actor="bob", via="console"))
        store.save(f)
    store.close()
    print("ok")
"""


def test_the_chain_holds_across_processes_forks_and_resumes(target: str, tmp_path: Path) -> None:
    first = script(WRITE_TRAIL, target, "first", cwd=tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "ok", first.stderr
    checked = cli("audit", "t", "--verify", "--store", target, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("3 records, chain intact; head ")
    anchor = checked.stdout.split("head ")[1].strip()
    second = script(WRITE_TRAIL, target, "second", cwd=tmp_path)  # a restart, writing on
    assert second.returncode == 0, second.stderr
    listed = cli("audit", "t", "--store", target, cwd=tmp_path)
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["seq"], r["action"], r["actor"]) for r in records] == [
        (1, "decision.recorded", "alice"),
        (2, "effect.started", None),
        (3, "effect.finished", None),
        (4, "decision.refused", "mallory"),
    ]
    assert records[2]["hash"] == anchor and records[3]["prev"] == anchor
    prev = GENESIS
    for r in records:  # anyone can re-check the exported chain
        assert r["prev"] == prev
        prev = _own_hash(prev, {k: v for k, v in r.items() if k != "hash"})
        assert r["hash"] == prev
    fork = cli("audit", "t-fork", "--store", target, cwd=tmp_path)
    forked, bob = (json.loads(line) for line in fork.stdout.splitlines())
    # forked at an early checkpoint, but chained to the parent's trail as it stood then
    assert forked["action"] == "session.forked" and forked["prev"] == anchor
    assert forked["detail"] == {"parent": "t", "checkpoint": 0, "effects": "shared",
                                "parent_seq": 3}  # fmt: skip
    assert bob["actor"] == "bob" and bob["via"] == "console"
    for sid in ("t", "t-fork"):
        again = cli("audit", sid, "--verify", "--store", target, cwd=tmp_path)
        assert again.returncode == 0 and "chain intact" in again.stdout, again.stdout


# -- by hand: edited, deleted, inserted records --------------------------------------------
def _build(target: str) -> list[dict[str, Any]]:
    """Five records on session ``t`` (written and closed in this process)."""
    from intermission.stores import open_store

    store = open_store(target)
    try:
        s = InMemoryAgentSession.of("t")
        for actor in ("alice", "bob", "carol"):
            note(s, AuditEntry(action="decision.recorded", actor=actor, via="api"))
            store.save(s)
        store.append_audit("t", [AuditEntry(action="decision.refused", actor="dave")] * 2)
        return [r.model_dump(mode="json") for r in store.audit("t")]
    finally:
        store.close()


def _tamper(target: str, how: str, records: list[dict[str, Any]]) -> None:
    run = _sql(target)
    if how == "edited":  # someone changes who approved
        run("UPDATE im_audit SET record = REPLACE(record, '\"bob\"', '\"mallory\"') "
            "WHERE session_id = 't' AND seq = 2")  # fmt: skip
    elif how == "deleted":
        run("DELETE FROM im_audit WHERE session_id = 't' AND seq = 3")
    elif how == "hash":
        run("UPDATE im_audit SET hash = ? WHERE session_id = 't' AND seq = 2", ("ab" * 32,))
    elif how == "inserted":  # a well-forged record slipped in after record 2, the rest moved on
        run("UPDATE im_audit SET seq = seq + 1000 WHERE session_id = 't' AND seq >= 3")
        run("UPDATE im_audit SET seq = seq - 999 WHERE session_id = 't' AND seq >= 1003")
        fields = {**records[1], "actor": "mallory", "seq": 3, "prev": records[1]["hash"]}
        del fields["hash"]
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        run("INSERT INTO im_audit (session_id, seq, record, hash) VALUES ('t', 3, ?, ?)",
            (text, _own_hash(fields["prev"], fields)))  # fmt: skip
    elif how == "appended":  # a record added at the end that does not link to the head
        fields = {**records[-1], "seq": 6, "prev": records[2]["hash"]}
        del fields["hash"]
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        run("INSERT INTO im_audit (session_id, seq, record, hash) VALUES ('t', 6, ?, ?)",
            (text, _own_hash(fields["prev"], fields)))  # fmt: skip


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("edited", "record 2: content edited"),
        ("deleted", "record 3: missing: it was deleted"),
        ("hash", "record 2: hash changed"),
        ("inserted", "record 4: out of place: its content says it is record 3"),
        ("appended", "record 6: chain broken: it does not follow record 5"),
    ],
)
def test_a_chain_changed_by_hand_fails_verify_naming_the_record(
    target: str, tmp_path: Path, how: str, expected: str
) -> None:
    records = _build(target)
    intact = cli("audit", "t", "--verify", "--store", target, cwd=tmp_path)
    assert intact.returncode == 0 and intact.stdout.startswith("5 records, chain intact")
    _tamper(target, how, records)
    checked = cli("audit", "t", "--verify", "--store", target, cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.strip().startswith(f"session t: {expected}"), checked.stdout


def test_a_rewrite_from_a_record_on_passes_verify_but_not_the_anchored_head(
    target: str, tmp_path: Path
) -> None:
    # what the chain cannot catch on its own without an audit key (README): someone with
    # write access rewrites the last record, its hash and the head in the session row;
    # only the head kept elsewhere tells (with the record alone rewritten, the row's does)
    records = _build(target)
    anchor = cli("audit", "t", "--verify", "--store", target, cwd=tmp_path).stdout.split()[-1]
    fields = {**records[-1], "actor": "nobody"}
    del fields["hash"]
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = _own_hash(fields["prev"], fields)
    _sql(target)(
        "UPDATE im_audit SET record = ?, hash = ? WHERE session_id = 't' AND seq = 5",
        (text, digest),
    )
    checked = cli("audit", "t", "--verify", "--store", target, cwd=tmp_path)
    assert checked.returncode == 1 and "not the session's head" in checked.stdout
    _sql(target)("UPDATE im_sessions SET audit_head = ? WHERE id = 't'", (digest,))
    checked = cli("audit", "t", "--verify", "--store", target, cwd=tmp_path)
    assert checked.returncode == 0 and checked.stdout.split()[-1] != anchor
    assert "not detectable without an audit key" in checked.stderr


# -- the CLI's other faces ------------------------------------------------------------------
def test_audit_cli_prints_csv_and_jsonl_and_creates_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.sqlite"
    store = SQLiteStore(path)
    hostile = AuditEntry(
        action="decision.refused",
        actor='=HYPERLINK("x")',
        roles=["sre", "ops"],
        reason="no\x1b[2Jreason",
    )
    store.append_audit("s", [hostile])
    store.close()
    assert main(["audit", "s", "--format", "csv", "--store", str(path)]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["seq", "at", "action", "actor", "roles", "via", "authenticated",
                       "target", "reason", "detail", "prev", "hash"]  # fmt: skip
    row = dict(zip(rows[0], rows[1], strict=True))
    assert row["actor"] == '\'=HYPERLINK("x")'  # a spreadsheet does not run it
    assert row["reason"] == "no\\x1b[2Jreason" and row["roles"] == "sre;ops"
    assert row["at"].endswith("+00:00") and row["prev"] == GENESIS and len(rows) == 2
    assert main(["audit", "s", "--store", str(path)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "\x1b" not in line and json.loads(line)["reason"] == "no\x1b[2Jreason"
    # a session with no records (a typo, or a trail deleted whole) is not "verified"
    assert main(["audit", "nobody", "--verify", "--store", str(path)]) == 1
    out = capsys.readouterr()
    assert out.out == "" and "no audit records for session nobody: nothing was verified" in out.err
    # read-only: a store that does not exist is an error, and is not created
    missing = tmp_path / "typo.sqlite"
    assert main(["audit", "s", "--store", str(missing)]) == 2
    assert "no SQLite store at" in capsys.readouterr().err and not missing.exists()
    assert main(["audit", "s", "--verify", "--store", f"sqlite:///{missing}"]) == 2
    assert not missing.exists()


# -- several writers at once --------------------------------------------------------------
WRITER = """
    import os, sys, time
    from intermission.audit import AuditEntry, note
    from intermission.errors import ConflictError, SessionBusyError
    from intermission.stores import open_store

    target, me, rounds, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = open_store(target)
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
    effects = 0
    for i in range(rounds):
        entry = AuditEntry(action="decision.recorded", actor=me, detail={"i": i})
        if i % 3 == 0:
            store.append_audit("hot", [entry])
            continue
        while True:  # a save with a noted entry, retried when another writer saved first
            s = store.load("hot")
            note(s, entry)
            try:
                store.save(s)
                break
            except (ConflictError, SessionBusyError):
                continue
        if i % 3 == 2:  # an effect: its records are written with the ledger entry
            s.once(f"{me}-{i}", lambda: i)
            effects += 1
    store.close()
    print(effects)
"""


def test_writers_in_several_processes_keep_one_chain(target: str, tmp_path: Path) -> None:
    from intermission.stores import open_store

    store = open_store(target)
    store.save(InMemoryAgentSession.of("hot"))
    store.close()
    go = tmp_path / "go"
    code = textwrap.dedent(WRITER)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, target, f"w{n}", str(ROUNDS), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            cwd=tmp_path,
        )
        for n in range(WRITERS)
    ]
    time.sleep(0.2)  # (a head start for the interpreters; the flag releases them together)
    go.touch()
    effects = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        effects += int(out.strip())
    store = open_store(target)
    try:
        records = store.audit("hot")
        result = store.verify_audit("hot")
    finally:
        store.close()
    assert result and result.records == len(records) == WRITERS * ROUNDS + 2 * effects
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    for n in range(WRITERS):  # each writer's entries in its own order, none lost
        mine = [r.detail["i"] for r in records if r.actor == f"w{n}"]
        assert mine == list(range(ROUNDS))
    print(f"\n{WRITERS} writers x {ROUNDS} rounds on {target[:10]}: {len(records)} records")


# -- an approved tool's effect --------------------------------------------------------------
def test_an_approved_tool_call_leaves_its_effect_records(make_store: Any) -> None:
    store = make_store()
    s = InMemoryAgentSession.of("ops-1")
    agent = build_ops_agent()
    agent.prompt("delete user 1001").session(s).call()
    store.save(s)
    with store.resume("ops-1") as s:
        (task,) = HITL.pending_tasks(s)
        HITL.submit(s, task, HITLDecision.approve().reviewer("lead"), agent=agent)  # (noted)
        store.save(s)
        agent.prompt().session(s).call()
    records = store.audit("ops-1")
    assert [r.action for r in records] == [
        "decision.recorded", "effect.started", "effect.finished",
    ]  # fmt: skip
    decided = records[0]
    assert (decided.actor, decided.via, decided.authenticated, decided.target) == (
        "lead", "api", False, task.call_uuid
    )  # a name asserted with .reviewer(), not authenticated
    key = records[1].target
    assert key is not None and key.startswith("tool/delete_user/") and records[2].target == key
    assert records[2].detail["status"] == "completed"
    assert store.load("ops-1").ledger[key].result == "user 1001 deleted"
    assert store.verify_audit("ops-1")


# -- any interleaving ----------------------------------------------------------------------
IDS = ("a", "b", "c")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.sampled_from(IDS), st.integers(0, 2)),
        st.tuples(st.just("stale"), st.sampled_from(IDS), st.integers(1, 2)),
        st.tuples(st.just("append"), st.sampled_from(IDS), st.integers(1, 2)),
        st.tuples(st.just("fork"), st.sampled_from(IDS), st.sampled_from(IDS)),
        st.tuples(st.just("effect"), st.sampled_from(IDS), st.integers(0, 1)),
        st.tuples(st.just("delete"), st.sampled_from(IDS), st.just(0)),
    ),
    max_size=14,
)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_any_interleaving_keeps_every_chain_verifiable(kind: str, ops: list[Any]) -> None:
    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(":memory:")
    counts = dict.fromkeys(IDS, 0)  # records each id should hold
    open_chain = dict.fromkeys(IDS, False)  # a chain that a delete would end
    n = 0

    def entry(sid: str) -> AuditEntry:
        nonlocal n
        n += 1
        return AuditEntry(action="decision.recorded", actor=f"{sid}{n}")

    def wrote(sid: str, k: int) -> None:
        counts[sid] += k
        open_chain[sid] = open_chain[sid] or k > 0

    try:
        for op, sid, arg in ops:
            exists = _exists(store, sid)
            if op == "save":
                s = store.load(sid) if exists else InMemoryAgentSession.of(sid)
                for _ in range(arg):
                    note(s, entry(sid))
                store.save(s)
                wrote(sid, arg)
            elif op == "stale" and exists:
                stale, winner = store.load(sid), store.load(sid)
                store.save(winner)
                for _ in range(arg):
                    note(stale, entry(sid))
                with pytest.raises(ConflictError):
                    store.save(stale)
                assert len(noted(stale)) == arg
            elif op == "append":
                store.append_audit(sid, [entry(sid) for _ in range(arg)])
                wrote(sid, arg)
            elif op == "fork" and exists and sid != arg and not _exists(store, arg):
                parent = store.load(sid)
                parent.record_checkpoint()  # (a fork needs a checkpoint to start from)
                store.save(parent)
                store.fork(sid, arg)
                wrote(arg, 1)
            elif op == "effect" and exists:
                s = store.load(sid)
                if arg:
                    s.once(f"k{len(ops)}-{n}", lambda: "done")
                    wrote(sid, 2)
                else:
                    s._ledger_start(f"u{n}")  # of unknown outcome, then resolved by hand
                    s.resolve_effect(f"u{n}", "checked", principal="ops")
                    wrote(sid, 2)
                n += 1
            elif op == "delete" and exists:
                store.delete(sid)
                if open_chain[sid]:
                    wrote(sid, 1)
                    open_chain[sid] = False
        for sid in IDS:
            result = store.verify_audit(sid)
            assert result, result
            assert result.records == counts[sid] == len(store.audit(sid))
    finally:
        store.close()


def _exists(store: Any, session_id: str) -> bool:
    return store.raw_row(session_id) is not None


def test_a_session_with_nothing_noted_pays_no_audit_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from intermission.stores._pool import Tx

    seen: list[str] = []
    original = Tx.run

    def run(self: Tx, sql: str, params: tuple[Any, ...] = ()) -> Any:
        seen.append(sql)
        return original(self, sql, params)

    store = SQLiteStore(tmp_path / "lean.sqlite")
    monkeypatch.setattr(Tx, "run", run)
    s = InMemoryAgentSession.of("lean")
    s.pending(True, "wait")
    store.save(s)
    with store.resume("lean") as s:
        s.pending(False)
    store.load("lean")
    # (the row's first INSERT starts its head at the id's records in the same statement)
    assert seen and not [sql for sql in seen if "im_audit" in sql and "INSERT" not in sql]
    note(s, AuditEntry(action="decision.recorded", actor="alice"))
    store.save(s)  # (the same path, now with something to write)
    assert [sql for sql in seen if "im_audit" in sql]
    store.close()


@pytest.mark.parametrize(
    ("sql", "sid", "expected"),
    [
        (  # the record a fork starts from, edited: the fork's link no longer holds
            "UPDATE im_audit SET record = REPLACE(record, 'bob', 'eve') "
            "WHERE session_id = 'par' AND seq = 2",
            "kid",
            "record 1: chain broken: it does not follow record 2 of session 'par', its fork point",
        ),
        (
            "DELETE FROM im_audit WHERE session_id = 'par' AND seq = 2",
            "kid",
            "record 1: chain broken: it starts from record 2 of session 'par', which is missing",
        ),
        (
            "UPDATE im_audit SET record = 'not json' WHERE session_id = 'kid' AND seq = 2",
            "kid",
            "record 2: unreadable: not an audit record",
        ),
        (  # the first records gone and the rest renumbered: a chain starting mid-way
            "DELETE FROM im_audit WHERE session_id = 'par' AND seq = 1; "
            "UPDATE im_audit SET seq = 1 WHERE session_id = 'par' AND seq = 2",
            "par",
            "record 1: out of place: its content says it is record 2",
        ),
        (
            "DELETE FROM im_audit WHERE session_id = 'par' AND seq IN (1, 2)",
            "par",
            "record 1: missing: it was deleted, and so are records up to 2",
        ),
    ],
)
def test_verify_names_broken_fork_links_and_unreadable_records(
    tmp_path: Path, sql: str, sid: str, expected: str
) -> None:
    path = tmp_path / "f.sqlite"
    store = SQLiteStore(path)
    parent = InMemoryAgentSession.of("par")
    parent.record_checkpoint()
    for actor in ("alice", "bob"):
        note(parent, AuditEntry(action="decision.recorded", actor=actor))
        store.save(parent)
    kid = store.load("par").fork("kid")
    store.save(kid)  # forked from record 2
    note(kid, AuditEntry(action="decision.recorded", actor="carol"))
    store.save(kid)
    note(parent, AuditEntry(action="decision.recorded", actor="dave"))
    store.save(parent)
    assert store.verify_audit("kid") and store.verify_audit("par")
    with sqlite3.connect(path) as conn:
        conn.executescript(sql)
    result = store.verify_audit(sid)
    assert not result and str(result).startswith(expected), str(result)
    store.close()
