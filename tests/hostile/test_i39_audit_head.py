"""Issue 39, attacked: the session row's head emptied by hand. Someone with write access
deletes the newest records (a refusal: nothing the session shows) and empties the row's
head columns (NULL, or 0) — ``audit --verify`` said "chain intact" (the empty head was only
noted as a limit). Checked through the CLI in a subprocess, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.stores.test_audit_missing import KEY, build, cli, sql, target, verify

from intermission.audit import AuditEntry
from intermission.stores import open_store
from intermission.testing.conformance import paused_change

__all__ = ["target"]  # (the store fixture: a SQLite file, or the test database)


@pytest.mark.parametrize("emptied", ["NULL", "0"])
def test_deleting_the_newest_record_and_emptying_the_head_is_detected(
    target: str, tmp_path: Path, emptied: str
) -> None:
    build(target)
    store = open_store(target)
    try:
        store.append_audit("s", [AuditEntry(action="decision.refused", actor="mallory")])
    finally:
        store.close()
    assert verify(target, tmp_path).returncode == 0
    run = sql(target)
    run("DELETE FROM im_audit WHERE session_id = 's' AND seq = 5")
    run(f"UPDATE im_sessions SET audit_seq = {emptied}, audit_head = NULL WHERE id = 's'")
    checked = verify(target, tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.startswith(
        "session s: record 4: missing: the session row keeps no head for its records"
    ), checked.stdout


def test_a_session_stored_after_refusals_of_its_id_starts_at_them(
    target: str, tmp_path: Path
) -> None:
    """The legitimate case an empty head stood for: records under the id before its row
    (a refusal of an unknown id). The new row's head is their last record, so the trail
    verifies, and deleting that record is seen."""
    store = open_store(target)
    try:
        store.append_audit("s", [AuditEntry(action="decision.refused", actor="eve")])
        store.save(paused_change("s"))
    finally:
        store.close()
    intact = verify(target, tmp_path)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    assert intact.stdout.startswith("1 records, chain intact"), intact.stdout
    head = cli("audit", "s", "--head", "--store", target, cwd=tmp_path).stdout.split()
    assert head[1] == "1"
    sql(target)("DELETE FROM im_audit WHERE session_id = 's'")
    gone = verify(target, tmp_path)
    assert gone.returncode == 1 and "record 1 deleted" in gone.stdout, gone.stdout


def test_the_memory_store_starts_a_row_at_its_ids_records() -> None:
    store = open_store("memory:")
    store.append_audit("s", [AuditEntry(action="decision.refused", actor="eve")])
    store.save(paused_change("s"))
    assert store.verify_audit("s").ok


def test_with_the_key_a_rollback_of_the_newest_records_and_the_head_is_said_unseen(
    target: str, tmp_path: Path
) -> None:
    """Deleting the newest record (a refusal) and setting the head back to the record before
    it is the database as it was: no key detects that, and a keyed --verify said "intact"
    with no note. It now says what only a copy of --head kept elsewhere catches."""
    build(target, key=KEY)
    store = open_store(target, audit_key=KEY)
    try:
        store.append_audit("s", [AuditEntry(action="decision.refused", actor="mallory")])
    finally:
        store.close()
    kept = cli("audit", "s", "--head", "--store", target, cwd=tmp_path, key=KEY).stdout.split()
    run = sql(target)
    ((digest,),) = run("SELECT hash FROM im_audit WHERE session_id = 's' AND seq = 4")
    run("DELETE FROM im_audit WHERE session_id = 's' AND seq = 5")
    run("UPDATE im_sessions SET audit_seq = 4, audit_head = ? WHERE id = 's'", (digest,))
    checked = verify(target, tmp_path, key=KEY)
    assert checked.returncode == 0, checked.stdout  # (as said: not detectable)
    assert checked.stderr.startswith("note: not detectable even with the audit key: the newest")
    assert "--head" in checked.stderr and KEY not in checked.stdout + checked.stderr
    now = cli("audit", "s", "--head", "--store", target, cwd=tmp_path, key=KEY).stdout.split()
    assert now != kept and kept[1] == "5"  # the copy kept elsewhere is what shows it
