"""Issue 27.8: a failed save releases its claim. When the save ending a resume fails (the disk
is full; the database refuses connections), the claim is released with the same bounded
wait as the other writes that must not be lost (``outage_s``), so once space (or the
database) is back the thread can be resumed at once. Before, the one attempt to release
failed too and the thread answered busy for the whole lease (5 minutes by default).

And "done" means saved: the CLI and ``decide_and_resume`` report success only after the
final save committed; when it fails, a one-line error and exit code 2, never "done".

The full disk is a small tmpfs mounted for the test (root only)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need, pg_dsn
from tests.faults._disk_agents import fill, ops_agent

from intermission import HITL, InMemoryAgentSession, StoreUnavailableError
from intermission.stores import SQLiteStore, decide_and_resume
from intermission.testing.conformance import paused_change

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs, unmounted after the test."""
    need(os.geteuid() == 0, "root, to mount a small tmpfs for a full disk")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _reader(path: Path) -> sqlite3.Connection:
    """Another process's connection to the store, kept open: the store's write-ahead log
    stays (when the last connection closes, SQLite folds the log into the database and
    deletes it, which would hand its space back)."""
    conn = sqlite3.connect(path)
    conn.execute("SELECT COUNT(*) FROM im_sessions").fetchall()
    return conn


def _shrink_wal(store: SQLiteStore) -> None:
    """Empty the write-ahead log, so the next writes need new space on the disk."""
    with store._tx("query") as run:
        run("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _release_frees(store: Any, free: Any, after_s: float = 0.5) -> list[str]:
    """When the resume gives up and releases its claim, ``free()`` the resource after
    ``after_s`` (the release is by then retrying); returns a log of what happened."""
    seen: list[str] = []
    real = store._release

    def release(*args: Any, **kw: Any) -> Any:
        seen.append("release")
        threading.Timer(after_s, lambda: (free(), seen.append("freed"))).start()
        return real(*args, **kw)

    store._release = release
    return seen


def test_a_full_disk_fails_the_save_and_the_claim_is_released_once_space_returns(
    small_disk: Path,
) -> None:
    store = SQLiteStore(small_disk / "s.db", outage_s=2.0)
    reader = _reader(small_disk / "s.db")
    try:
        store.save(paused_change("disk"))
        _shrink_wal(store)
        filler: list[Path] = []
        seen = _release_frees(store, lambda: filler[0].unlink())
        with pytest.raises(StoreUnavailableError, match="full"):
            with store.resume("disk") as s:
                filler.append(fill(small_disk))  # the disk fills while the resume runs
                s.context.put("report", "x" * 20_000)
        assert seen[:1] == ["release"]
        assert store._holder("disk") is None  # released, not held for the whole lease
        with store.resume("disk") as s:  # at once: nothing of the failed resume was saved
            assert s.context.get("report") is None
            s.context.put("report", "second try")
        assert store.load("disk").context.get("report") == "second try"
    finally:
        reader.close()
        store.close()


def test_a_database_that_refuses_connections_fails_the_save_and_the_claim_is_released() -> None:
    """PostgreSQL: the store's connections are dropped and new ones refused while the
    resume runs; the release waits for the database to take connections again."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    dsn = pg_dsn()
    name = conninfo_to_dict(dsn)["dbname"]
    admin = psycopg.connect(make_conninfo(dsn, dbname="postgres"), autocommit=True)

    def allow(yes: bool) -> None:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if yes else "false"}')

    store = fresh_pg(outage_s=2.0)
    try:
        store.save(paused_change("away"))
        seen = _release_frees(store, lambda: allow(True))
        with pytest.raises(StoreUnavailableError):
            with store.resume("away") as s:
                allow(False)
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                )
                s.context.put("report", "lost")
        assert seen[:1] == ["release"]
        assert store._holder("away") is None
        with store.resume("away") as s:
            assert s.context.get("report") is None
    finally:
        allow(True)
        admin.close()
        store.close()


def _paused_ops(store: Any, sid: str) -> None:
    s = InMemoryAgentSession(sid)
    ops_agent().prompt("archive orders").session(s).call()
    assert s.is_pending
    store.save(s)


def test_decide_and_resume_reports_nothing_when_the_final_save_fails(small_disk: Path) -> None:
    store = SQLiteStore(small_disk / "s.db", outage_s=1.0)
    os.environ["IM_FILL_DIR"] = str(small_disk)
    reader = _reader(small_disk / "s.db")
    try:
        _paused_ops(store, "dr")
        outcome = None
        with pytest.raises(StoreUnavailableError):  # the tool took the disk's last space
            outcome = decide_and_resume(store, "dr", HITL.approve_all, ops_agent())
        assert outcome is None
        (small_disk / "filler").unlink()
        after = store.load("dr")
        assert after.is_pending and after.events.next_seq > 0  # the decision, saved first
    finally:
        os.environ.pop("IM_FILL_DIR", None)
        reader.close()
        store.close()


def test_the_cli_never_prints_done_when_the_final_save_fails(small_disk: Path) -> None:
    path = small_disk / "s.db"
    store = SQLiteStore(path)
    _paused_ops(store, "cli-disk")
    store.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IM_FILL_DIR": str(small_disk)}
    reader = _reader(path)
    out = subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", "tests.faults._disk_agents:AGENTS",
         "approve", "cli-disk", "--reviewer", "alice", "--store", str(path)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2, out.stdout + out.stderr
    assert "done" not in out.stdout and out.stdout == ""
    assert out.stderr.startswith("error: ") and "full" in out.stderr
    assert "Traceback" not in out.stderr
    reader.close()
    (small_disk / "filler").unlink()
    store = SQLiteStore(path)
    try:
        assert store.load("cli-disk").is_pending  # not done: the approval is still open
    finally:
        store.close()
