"""Issue 13.4 / R40: PostgresStore survives a server restart and killed backends.

Before: after the server dropped a backend, the pool kept the dead connection and every
later call raised a bare psycopg OperationalError until the process restarted. Now a broken
connection is discarded, the next call connects anew, errors during the outage are
StoreErrors, and writes that must not be lost (a ledger entry of an effect that ran, the
save ending a resume) wait for the database to come back.

The test runs 4 workers resuming approved sessions while the real server's backends are
terminated (``pg_terminate_backend``) and the server is restarted (``pg_ctlcluster …
restart``); every session must end done with its effect run exactly once.
"""

from __future__ import annotations

import queue
import random
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from tests._helpers import fresh_pg, need, pg_dsn
from tests.faults._helpers import EFFECT_KEY, lines, tally

from intermission import (
    NothingToResumeError,
    SessionBusyError,
    StoreError,
    StoreUnavailableError,
)
from intermission.examples import build_change_graph
from intermission.stores import PostgresStore
from intermission.testing.conformance import paused_change
from intermission.testing.workers import append_effect

ROUNDS = 20
SESSIONS_PER_ROUND = 12
WORKERS = 4


def _cluster(dsn: str) -> tuple[str, str]:
    """(version, name) of the local cluster serving ``dsn``."""
    need(shutil.which("pg_lsclusters") is not None, "pg_lsclusters (Debian's postgresql-common)")
    port = str(urlparse(dsn).port or 5432)
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        version, name, cluster_port, *_ = line.split()
        if cluster_port == port:
            return version, name
    need(False, f"a local cluster on port {port} to restart")
    raise AssertionError("unreachable")


def _terminate_backends(dsn: str) -> int:
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE usename = current_user AND pid <> pg_backend_pid() "
                "AND datname = current_database()"
            ).fetchall()
        return len(rows)
    except psycopg.OperationalError:
        return 0  # the server is restarting


def _until_gone(dsn: str) -> None:
    """Wait until no other backend of this user and database is left."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
        for _ in range(500):
            left = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user "
                "AND pid <> pg_backend_pid() AND datname = current_database()"
            ).fetchone()
            if left is not None and left[0] == 0:
                return
            time.sleep(0.01)
    raise AssertionError("terminated backends did not go away")


def _open(dsn: str, seen: dict[str, int]) -> PostgresStore:
    while True:  # a worker starting during an outage retries, as a real one would
        try:
            return PostgresStore(dsn, lease_ms=2000, outage_s=20)
        except StoreUnavailableError:
            seen["StoreUnavailableError"] = seen.get("StoreUnavailableError", 0) + 1
            time.sleep(0.2)


def _worker(dsn: str, jobs: queue.Queue[tuple[str, Path]], seen: dict[str, int]) -> None:
    store = _open(dsn, seen)
    try:
        while True:
            try:
                sid, effect_file = jobs.get_nowait()
            except queue.Empty:
                return
            team = build_change_graph(append_effect(str(effect_file)))
            while True:
                try:
                    with store.resume(sid) as s:
                        team.prompt().session(s).call()
                    seen["ran"] = seen.get("ran", 0) + 1
                    break
                except NothingToResumeError:  # a save committed before its answer was lost
                    seen["nothing to resume"] = seen.get("nothing to resume", 0) + 1
                    break
                except (StoreUnavailableError, SessionBusyError) as exc:
                    name = type(exc).__name__
                    seen[name] = seen.get(name, 0) + 1
                    time.sleep(0.2)
    finally:
        store.close()


@pytest.mark.serial  # restarts the PostgreSQL cluster every other test (and worker) uses
def test_restarts_and_killed_backends_under_four_workers_resume_every_session_once(
    tmp_path: Path,
) -> None:
    dsn = pg_dsn()
    version, name = _cluster(dsn)
    admin = fresh_pg()
    rng = random.Random(13)
    seen: dict[str, int] = {}
    effects = killed = restarts = lost = 0
    for round_no in range(ROUNDS):
        jobs: queue.Queue[tuple[str, Path]] = queue.Queue()
        round_sids = []
        for i in range(SESSIONS_PER_ROUND):
            sid = f"r{round_no}-{i}"
            s = paused_change(sid)
            s.context.put("approval.decision", "APPROVE")
            s.context.put("approval.operator", "alice")
            for _attempt in range(50):  # the admin store meets the same outages
                try:
                    admin.save(s)
                    break
                except StoreUnavailableError:
                    time.sleep(0.2)
            else:
                raise AssertionError("the database did not come back")
            effect_file = tmp_path / f"{sid}.log"
            jobs.put((sid, effect_file))
            round_sids.append((sid, effect_file))
        workers = [threading.Thread(target=_worker, args=(dsn, jobs, seen))
                   for _ in range(WORKERS)]  # fmt: skip
        for w in workers:
            w.start()
        restart_at = 1 if round_no % 4 == 0 else -1
        chaos = 0
        while any(w.is_alive() for w in workers):  # kill backends while the workers run
            time.sleep(rng.uniform(0.01, 0.06))
            chaos += 1
            if chaos == restart_at:
                subprocess.run(["pg_ctlcluster", version, name, "restart"], check=True)
                restarts += 1
            else:
                killed += _terminate_backends(dsn)
        for w in workers:
            w.join(120)
            assert not w.is_alive(), "a worker hung"
        for sid, effect_file in round_sids:
            final = _load(admin, sid)
            assert final.status == "done", (sid, final.status)
            assert final.ledger[EFFECT_KEY].status == "completed"
            assert lines(effect_file) == 1, (sid, lines(effect_file))
            lost += final.context.get("approval.decision") != "APPROVE"
            effects += lines(effect_file)
    admin.close()
    print("lost-connection outcomes:", seen, f"killed {killed} backends, {restarts} restarts")
    assert lost == 0 and restarts >= 5 and killed > 0
    assert seen.get("StoreUnavailableError", 0) > 0  # the outages did reach the workers
    total = ROUNDS * SESSIONS_PER_ROUND
    tally("PostgreSQL restarts and killed backends", trials=total, effects=effects,
          expected=total, refused=seen.get("StoreUnavailableError", 0))  # fmt: skip


def _load(store: Any, sid: str) -> Any:
    for _ in range(50):
        try:
            return store.load(sid)
        except StoreUnavailableError:
            time.sleep(0.2)
    raise AssertionError("the database did not come back")


def test_a_dead_pooled_connection_is_replaced_and_outage_errors_are_store_errors() -> None:
    store = fresh_pg()
    store.save(paused_change("p"))
    assert store.load("p").is_pending  # the pool now holds an idle connection
    assert _terminate_backends(pg_dsn()) >= 1
    _until_gone(pg_dsn())
    assert store.load("p").is_pending  # found dead, replaced, nothing lost
    # after a restart every pooled connection is dead: each is found so and replaced
    held = [store._borrow()[0] for _ in range(4)]  # four connections in the pool
    for conn in held:
        store._give_back(conn)
    assert _terminate_backends(pg_dsn()) >= 4
    _until_gone(pg_dsn())  # (their goodbyes sent: a restart's come before the next request)
    for mode in ("query", "write"):  # a one-statement read and a BEGIN: neither fails
        assert store.load("p").is_pending
        assert _terminate_backends(pg_dsn()) >= 1
        _until_gone(pg_dsn())
        with store._tx(mode) as run:
            assert run("SELECT status FROM im_sessions WHERE id = ?", ("p",)).fetchone()
    unreachable = "postgresql://intermission:intermission@127.0.0.1:1/intermission"
    with pytest.raises(StoreUnavailableError) as info:
        PostgresStore(unreachable, connect_timeout_s=1)
    assert isinstance(info.value, StoreError) and "intermission:intermission" not in str(info.value)
    store.close()
