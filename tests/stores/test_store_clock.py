"""Issue 27.6: time is the store's. Claims, leases, saves and decision deadlines are stamped
and judged by one clock per store — PostgreSQL's own (inside the statements, and read in
Python as the local monotonic clock plus an offset measured from the server), the local
clock for SQLite and memory — so processes whose own clocks disagree still agree. Before,
each process judged by its own wall clock: with libfaketime, a CLI or server 60 s behind
accepted an approval after its deadline and the tool ran; one 10 minutes ahead took another
process's live, renewed claim.

A test clock: ``store(clock=FakeClock(...))`` makes the fake clock the store's everywhere
(PostgreSQL included: its statements then take the fake time as a parameter)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need, need_module, pg_dsn
from tests.faults._helpers import lines
from tests.faults._race_agents import DEADLINE_MS, change_graph, ops_agent

from intermission import HITL, DeadlinePassedError, FakeClock, HITLDecision, InMemoryAgentSession

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "tests.faults._race_agents:AGENTS"


def faked(offset: str) -> dict[str, str]:
    """The environment of a process whose wall clock is off by ``offset`` (``-60s``): the
    libfaketime library preloaded (the ``faketime`` command would run the process as its
    child, which stopping the command leaves running). The monotonic clock is left alone:
    a process's own clock being off is the fault under test, not one that jumps."""
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    need(bool(found), "libfaketime (apt-get install faketime)")
    return {"LD_PRELOAD": found[0], "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def skewed(offset: str, *args: str, effects: Path) -> subprocess.CompletedProcess[str]:
    """``python -m intermission ARGS`` in a process whose wall clock is off by ``offset``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IM_EFFECT_FILE": str(effects),
           **faked(offset)}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", AGENTS, *args], capture_output=True,
        text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


def skew_of(offset: str) -> float:
    """How far off (seconds) a process with ``faked(offset)`` believes the time is."""
    out = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"], capture_output=True,
        text=True, env={**os.environ, **faked(offset)}, timeout=60, check=True,
    )  # fmt: skip
    return float(out.stdout) - time.time()


def _paused_by_the_store(store: Any, sid: str, agent: Any) -> None:
    """Pause ``agent`` on a new session claimed from ``store``: its deadline is stamped by
    the store's clock."""
    store.save(InMemoryAgentSession(sid))
    with store.claim(sid) as s:
        agent.prompt("delete 1001").session(s).call()
    assert store.load(sid).is_pending


def _wait(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    give_up = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < give_up, f"{what} within {timeout_s} s"
        time.sleep(0.05)


# -- the clock sessions carry ------------------------------------------------------------
def test_sessions_from_a_store_carry_its_clock_and_deadlines_follow_it(make_store: Any) -> None:
    clock = FakeClock(start_ms=1_000_000.0, step_ms=0)
    store = make_store(clock=clock)
    _paused_by_the_store(store, "c", ops_agent())
    loaded = store.load("c")
    assert loaded.clock is clock  # before: a loaded session always had the wall clock
    (task,) = HITL.pending_tasks(loaded)
    assert task.deadline_ms == 1_000_000.0 + DEADLINE_MS  # stamped by the store's clock
    assert store.pending()[0].pending_since == 1_000_000.0
    assert HITL.expired_tasks(loaded) == []
    clock.advance(DEADLINE_MS)  # the store's time passes the deadline: judged by it
    assert HITL.expired_tasks(store.load("c")) == [task]
    with pytest.raises(DeadlinePassedError):
        HITL.submit(store.load("c"), task, HITLDecision.approve())
    with store.resume("c") as s:
        assert s.clock is clock
        assert ops_agent().prompt().session(s).call().content.startswith("Rejected")


def test_postgres_stamps_by_its_own_clock_without_an_extra_query() -> None:
    from intermission.stores.clock import ServerClock

    store = fresh_pg(lease_ms=60_000)
    try:
        assert isinstance(store.clock, ServerClock) and store.clock.known
        with store._tx("read") as run:
            server_ms = float(run(f"SELECT {store.server_now}").fetchone()[0])
        assert abs(store.clock.now_ms() - server_ms) < 5_000
        _paused_by_the_store(store, "pg", ops_agent())
        with store.resume("pg"):
            with store._tx("read") as run:
                stamped, until, now = run(
                    f"SELECT updated_ms, claim_until, {store.server_now} FROM im_sessions "
                    "WHERE id = 'pg'"
                ).fetchone()
            assert abs(until - 60_000 - now) < 5_000 and abs(stamped - now) < 5_000
        # a store given a clock (tests) stamps by it, PostgreSQL included
        fake = fresh_pg(clock=FakeClock(start_ms=5_000.0, step_ms=0))
        try:
            fake.save(InMemoryAgentSession("f"))
            assert fake.raw_row("f")[9] == 5_000.0  # updated_ms
            assert fake.load("f").clock is fake.clock
        finally:
            fake.close()
    finally:
        store.close()


# -- skewed processes (libfaketime, PostgreSQL) ------------------------------------------
def test_a_cli_60_s_behind_refuses_an_approval_after_its_deadline(tmp_path: Path) -> None:
    dsn, effects = pg_dsn(), tmp_path / "effects"
    assert skew_of("-60s") < -55  # the fault applies
    store = fresh_pg()
    sid = "skew-" + uuid.uuid4().hex[:8]
    try:
        _paused_by_the_store(store, sid, ops_agent())
        (task,) = HITL.pending_tasks(store.load(sid))
        assert task.deadline_ms is not None
        deadline = task.deadline_ms
        _wait(lambda: store.clock.now_ms() > deadline + 100, "the deadline passes")
        row = store.raw_row(sid)
        approve = skewed("-60s", "approve", sid, "--reviewer", "alice", "--store", dsn,
                         effects=effects)  # fmt: skip
        assert approve.returncode == 2, approve.stdout + approve.stderr
        assert "had to be decided by" in approve.stderr and "Traceback" not in approve.stderr
        assert lines(effects) == 0 and store.raw_row(sid) == row  # the tool never ran
        pending = skewed("-60s", "pending", "--store", dsn, effects=effects)
        assert f"{sid} " in pending.stdout and "[expired]" in pending.stdout, pending.stdout
        show = skewed("-60s", "show", sid, "--store", dsn, effects=effects)
        assert "[expired: the next resume rejects it]" in show.stdout, show.stdout
    finally:
        store.close()


def test_a_cli_10_minutes_ahead_does_not_take_a_live_renewed_claim(tmp_path: Path) -> None:
    dsn, effects = pg_dsn(), tmp_path / "effects"
    assert skew_of("+600s") > 590
    store = fresh_pg(lease_ms=3_000)  # renewed every second while held
    sid = "held-" + uuid.uuid4().hex[:8]
    try:
        s = InMemoryAgentSession(sid)
        change_graph().prompt("upgrade").session(s).call()
        store.save(s)
        holder = store.resume(sid)
        held = holder.__enter__()
        first = store._claim_until(sid)
        _wait(lambda: (store._claim_until(sid) or 0) > (first or 0), "a renewal")
        approve = skewed("+600s", "approve", sid, "--wait", "0", "--reviewer", "mallory",
                         "--store", dsn, effects=effects)  # fmt: skip
        assert approve.returncode == 2, approve.stdout + approve.stderr
        assert "is being resumed by someone else" in approve.stderr, approve.stderr
        assert lines(effects) == 0
        held.context.put("note", "still mine")
        holder.__exit__(None, None, None)  # the holder's save goes through: nobody took it
        assert store.load(sid).context.get("note") == "still mine"
    finally:
        store.close()


def test_a_server_60_s_behind_refuses_an_interrupt_expired_by_the_stores_time(
    tmp_path: Path,
) -> None:
    """The AG-UI server plans a resume by the store's time: an interrupt another server
    paused, expired by the store's clock, is refused however late this server's own clock
    runs, and its tool never runs."""
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    need_module("httpx", "httpx")
    from tests.agui._server import Server, types

    dsn, effects = pg_dsn(), tmp_path / "effects"
    assert skew_of("-60s") < -55  # the fault applies
    store = fresh_pg()
    env = {"IM_EFFECT_FILE": str(effects)}
    in_sync = Server(dsn, tmp_path / "a.log", env=env, agents=AGENTS)
    behind = Server(dsn, tmp_path / "b.log", agents=AGENTS, env={**env, **faked("-60s")})
    try:
        thread = "late-" + uuid.uuid4().hex[:8]
        start = {"threadId": thread, "runId": "r1",
                 "messages": [{"id": "u1", "role": "user", "content": "delete 1001"}]}  # fmt: skip
        events = in_sync.run("ops", start)  # its approval expires 200 ms after it is asked
        (interrupt,) = events[-1][1]["outcome"]["interrupts"]
        (task,) = HITL.pending_tasks(store.load(thread))
        deadline = task.deadline_ms or 0.0
        _wait(lambda: store.clock.now_ms() > deadline + 100, "the deadline passes")
        resume = [{"interruptId": interrupt["id"], "status": "resolved",
                   "payload": {"approved": True}}]  # fmt: skip
        answer = behind.run("ops", {"threadId": thread, "runId": "r2", "resume": resume})
        assert types(answer)[-1] == "RUN_ERROR", types(answer)
        assert answer[-1][1]["code"] == "INTERRUPT_EXPIRED", answer[-1][1]
        assert lines(effects) == 0
    finally:
        in_sync.stop()
        behind.stop()
        store.close()
