"""An audit trail that notices what is missing (issue 39), tried as an attacker with write
access would: raw SQL against SQLite and PostgreSQL (sqlite3, psycopg), checked by
``python -m intermission audit --verify`` in a subprocess. Deleted newest records, a trail
cut to its first record, a rewrite with recomputed hashes (with and without the audit key),
``--head``, refusals by the CLI, and a store written before the head existed (migration 8)
opened by several processes at once."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn

from intermission.audit import AuditEntry
from intermission.examples import build_change_graph
from intermission.hitl import decide_graph
from intermission.stores import open_store
from intermission.stores.decide import decide_and_resume
from intermission.stores.sql_schema import SCHEMA_VERSION
from intermission.testing.conformance import paused_change, paused_ops
from intermission.testing.conformance_audit import ANN

KEY = "an-audit-key-for-tests-0123456789abcdef"
GENESIS = "0" * 64
EFFECT = "change-001/execute"


def env(key: str | None = None) -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out.pop("INTERMISSION_AUDIT_KEY", None)
    if key is not None:
        out["INTERMISSION_AUDIT_KEY"] = key
    return out


def cli(*args: str, cwd: Path, key: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, cwd=cwd, env=env(key), timeout=120,
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL another process can open: a SQLite file or the (emptied) test database."""
    if request.param == "sqlite":
        yield str(tmp_path / "audit.sqlite")
    else:
        fresh_pg().close()
        yield pg_dsn()


def sql(target: str) -> Callable[..., list[tuple[Any, ...]]]:
    """Run SQL on the store's database directly, as someone with write access would."""

    def run(statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if target.startswith("postgresql://"):
            import psycopg

            with psycopg.connect(target, autocommit=True) as conn:
                cur = conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
                return list(cur.fetchall()) if cur.description else []
        conn = sqlite3.connect(target, isolation_level=None)
        try:
            return list(conn.execute(statement, params).fetchall())
        finally:
            conn.close()

    return run


def build(target: str, key: str | None = None) -> list[dict[str, Any]]:
    """Session ``s``: eve's refused attempt (record 1), ann's approval (2), the effect
    started (3) and completed (4); written in this process, closed."""
    store = open_store(target, audit_key=key)
    try:
        store.save(paused_change("s"))
        store.append_audit("s", [AuditEntry(action="decision.refused", actor="eve")])
        decide_and_resume(store, "s", lambda s: decide_graph(s, "APPROVE", principal=ANN),
                          build_change_graph())  # fmt: skip
        records = [r.model_dump(mode="json") for r in store.audit("s")]
    finally:
        store.close()
    assert [(r["action"], r["actor"]) for r in records] == [
        ("decision.refused", "eve"), ("approval.recorded", "ann"),
        ("effect.started", None), ("effect.finished", None),
    ]  # fmt: skip
    return records


def rehash(target: str, records: list[dict[str, Any]], key: bytes | None, keyed: bool) -> None:
    """Rewrite the stored records from the first on with recomputed hashes (HMAC under
    ``key``, marked keyed when ``keyed``) and the session row's head to match."""
    run = sql(target)
    prev = GENESIS
    for fields in records:
        fields = {k: v for k, v in fields.items() if k not in ("hash", "keyed")}
        fields["prev"] = prev
        if keyed:
            fields["keyed"] = True
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        data = (prev + text).encode("utf-8")
        prev = (hmac.new(key, data, hashlib.sha256) if key else hashlib.sha256(data)).hexdigest()
        run("UPDATE im_audit SET record = ?, hash = ? WHERE session_id = 's' AND seq = ?",
            (text, prev, fields["seq"]))  # fmt: skip
    run("UPDATE im_sessions SET audit_seq = ?, audit_head = ? WHERE id = 's'",
        (records[-1]["seq"], prev))  # fmt: skip


def verify(target: str, cwd: Path, key: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli("audit", "s", "--verify", "--store", target, cwd=cwd, key=key)


def test_deleting_the_newest_record_is_detected(target: str, tmp_path: Path) -> None:
    build(target)
    assert verify(target, tmp_path).returncode == 0
    sql(target)("DELETE FROM im_audit WHERE session_id = 's' AND seq = 4")
    checked = verify(target, tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.startswith(
        "session s: record 4: missing: the session's head is record 4"
    ), checked.stdout
    assert "the chain ends at record 3" in checked.stdout
    assert f"no record of the completed effect '{EFFECT}'" in checked.stdout


def test_deleting_every_record_but_the_first_names_what_is_missing(
    target: str, tmp_path: Path
) -> None:
    build(target)
    sql(target)("DELETE FROM im_audit WHERE session_id = 's' AND seq > 1")
    checked = verify(target, tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    out = checked.stdout
    assert "records 2–4 deleted" in out, out
    assert "no record of the decision of ann (APPROVE) on the approval" in out, out
    assert f"the completed effect '{EFFECT}'" in out, out
    # the trail deleted whole: not "nothing to verify", but what is gone
    sql(target)("DELETE FROM im_audit WHERE session_id = 's'")
    gone = verify(target, tmp_path)
    assert gone.returncode == 1 and "records 1–4 deleted" in gone.stdout, gone.stdout
    assert "no record of the decision of ann (APPROVE)" in gone.stdout


def test_a_rewrite_with_recomputed_hashes_is_detected_with_the_key(
    target: str, tmp_path: Path
) -> None:
    records = build(target, key=KEY)
    assert all(r.get("keyed") for r in records)
    intact = verify(target, tmp_path, key=KEY)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert intact.stderr.startswith("note: not detectable even with the audit key: the newest")
    forged = [{**r, "actor": "mallory"} if r["actor"] == "ann" else r for r in records]
    guessed = b"a-guessed-key-0123456789"
    for key, keyed, expected in (
        (None, False, "record 1: written without the audit key"),  # plain SHA-256
        (guessed, True, "record 1: content edited: it no longer matches its MAC"),
    ):
        rehash(target, forged, key, keyed)
        checked = verify(target, tmp_path, key=KEY)
        assert checked.returncode == 1, checked.stdout + checked.stderr
        assert checked.stdout.startswith(f"session s: {expected}"), checked.stdout
        for shown in (checked.stdout, checked.stderr):
            assert KEY not in shown  # the key is never printed
    # the honest chain again (rewritten under the store's key): intact; without the key,
    # a keyed chain cannot be checked and --verify says so
    rehash(target, records, KEY.encode(), True)
    assert verify(target, tmp_path, key=KEY).returncode == 0
    blind = verify(target, tmp_path)
    assert blind.returncode == 1 and "cannot be checked without the audit key" in blind.stdout


def test_without_the_key_verify_says_what_it_cannot_detect(target: str, tmp_path: Path) -> None:
    records = build(target)
    intact = verify(target, tmp_path)
    assert intact.returncode == 0
    assert intact.stderr.startswith("note: not detectable without an audit key: a rewrite")
    # ann's approval turned into mallory's: the chain and head recomputed, yet the session
    # still shows ann's decision, so the trail misses it
    rehash(target, [{**r, "actor": "mallory"} if r["actor"] == "ann" else r for r in records],
           None, False)  # fmt: skip
    named = verify(target, tmp_path)
    assert named.returncode == 1
    assert "no record of the decision of ann (APPROVE)" in named.stdout, named.stdout
    # a rewrite of what the session does not show (who was refused) goes unseen: as said
    rehash(target, [{**r, "actor": "bob"} if r["actor"] == "eve" else r for r in records],
           None, False)  # fmt: skip
    unseen = verify(target, tmp_path)
    assert unseen.returncode == 0 and "chain intact" in unseen.stdout
    assert "INTERMISSION_AUDIT_KEY" in unseen.stderr


def test_head_prints_the_hash_and_count_that_move_with_each_record(
    target: str, tmp_path: Path
) -> None:
    build(target)
    first = cli("audit", "s", "--head", "--store", target, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    digest, count = first.stdout.split()
    assert count == "4" and len(digest) == 64
    assert verify(target, tmp_path).stdout.split()[-1] == digest
    # a CLI refusal adds a record: the head moves on
    refused = cli("approve", "s", "--store", target, cwd=tmp_path)
    assert refused.returncode == 2
    moved = cli("audit", "s", "--head", "--store", target, cwd=tmp_path).stdout.split()
    assert moved[1] == "5" and moved[0] != digest
    none = cli("audit", "nobody", "--head", "--store", target, cwd=tmp_path)
    assert none.returncode == 1 and "no audit records" in none.stderr


def test_a_cli_refusal_on_a_finished_session_is_on_the_trail(target: str, tmp_path: Path) -> None:
    build(target)
    before = sql(target)("SELECT snapshot, version FROM im_sessions WHERE id = 's'")
    for verb in (["approve", "s"], ["reject", "s", "--reason", "too late"]):
        done = cli(*verb, "--store", target, "--reviewer", "Ann B.", cwd=tmp_path)
        assert done.returncode == 2 and "is done" in done.stderr, done.stderr
    assert sql(target)("SELECT snapshot, version FROM im_sessions WHERE id = 's'") == before
    listed = cli("audit", "s", "--store", target, cwd=tmp_path)
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    tried = [(r["action"], r["via"], r["detail"]["verdict"], r["detail"]["error"])
             for r in records[4:]]  # fmt: skip
    assert tried == [
        ("decision.refused", "cli", "approve", "NothingToResumeError"),
        ("decision.refused", "cli", "reject", "NothingToResumeError"),
    ]
    # the OS user, unmapped (no --auth): user@host, asserted (R60)
    assert all(not r.get("authenticated") and "@" in r["actor"] for r in records[4:])
    assert verify(target, tmp_path).returncode == 0


AGENTS = """
from intermission.examples import build_ops_agent

AGENTS = {"ops": build_ops_agent}
"""


def test_a_cli_refusal_of_an_unknown_call_is_on_the_trail(target: str, tmp_path: Path) -> None:
    (tmp_path / "my_agents.py").write_text(AGENTS)
    store = open_store(target)
    try:
        store.save(paused_ops("ops-1"))
    finally:
        store.close()
    refused = cli("approve", "ops-1", "--call", "no-such-call", "--agents", "my_agents:AGENTS",
                  "--store", target, cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2 and "is not one of its calls" in refused.stderr
    listed = cli("audit", "ops-1", "--store", target, cwd=tmp_path)
    (last,) = [json.loads(line) for line in listed.stdout.splitlines()][-1:]
    assert (last["action"], last["target"], last["detail"]["error"]) == (
        "decision.refused", "no-such-call", "UsageError",
    )  # fmt: skip


# -- a store written before the head existed (schema 7), opened by several processes ------
OPEN = """
    import sys
    from intermission.stores import open_store

    open_store(sys.argv[1]).close()
    print("ok")
"""


def _as_schema_7(target: str) -> None:
    """Take the store back to schema 7, as the landed code before this change wrote it."""
    run = sql(target)
    # (and before migrations 9 and 10, which came later: the agent version's column and
    # indexes, the index of the sessions saved last)
    run("DROP INDEX im_sessions_updated")
    run("DELETE FROM im_schema WHERE version = 10")
    run("DROP INDEX im_sessions_pending_version")
    run("DROP INDEX im_sessions_stopped_version")
    run("ALTER TABLE im_sessions DROP COLUMN agent_version")
    run("DELETE FROM im_schema WHERE version = 9")
    run("ALTER TABLE im_sessions DROP COLUMN audit_seq")
    run("ALTER TABLE im_sessions DROP COLUMN audit_head")
    run("DELETE FROM im_schema WHERE version = 8")


def test_a_store_from_before_the_head_migrates_once_with_heads_computed(
    target: str, tmp_path: Path
) -> None:
    build(target)
    _as_schema_7(target)
    pipe = subprocess.PIPE
    code = [sys.executable, "-c", textwrap.dedent(OPEN), target]
    opened = [
        subprocess.Popen(code, stdout=pipe, stderr=pipe, text=True, env=env(), cwd=tmp_path)
        for _ in range(3)
    ]
    for p in opened:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    run = sql(target)
    versions = sorted(v for (v,) in run("SELECT version FROM im_schema"))
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    (head,) = run("SELECT audit_seq, audit_head FROM im_sessions WHERE id = 's'")
    listed = cli("audit", "s", "--store", target, cwd=tmp_path)
    last = json.loads(listed.stdout.splitlines()[-1])
    assert head == (4, last["hash"])  # the head, computed by the migration
    assert verify(target, tmp_path).returncode == 0
    run("DELETE FROM im_audit WHERE session_id = 's' AND seq = 4")
    assert verify(target, tmp_path).returncode == 1
