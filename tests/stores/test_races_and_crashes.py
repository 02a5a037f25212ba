"""Exactly-once resume under races (threads and processes) and SIGKILL (R30, R32)."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn

from intermission import EffectOutcomeUnknownError, NothingToResumeError, SessionBusyError
from intermission.examples import build_change_graph
from intermission.testing.conformance import paused_change
from intermission.testing.workers import append_effect, resume_change

TRIALS = int(os.environ.get("IM_RACE_TRIALS", 100))  # (more: IM_RACE_TRIALS=500)
CRASH_TRIALS = int(os.environ.get("IM_CRASH_TRIALS", 25))  # (more: IM_CRASH_TRIALS=200)


def target_for(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "race.db")
    fresh_pg().close()
    return pg_dsn()


def open_target(kind: str, target: str, **kw: Any) -> Any:
    from intermission.stores import open_store

    return open_store(target, **kw)


def approved(store: Any, sid: str) -> None:
    s = paused_change(sid)
    s.context.put("approval.decision", "APPROVE")
    s.context.put("approval.operator", "alice")
    store.save(s)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_threads_resuming_one_session_exactly_one_runs(kind: str, tmp_path: Path) -> None:
    from intermission.stores import MemoryStore

    store = MemoryStore() if kind == "memory" else open_target(kind, target_for(kind, tmp_path))
    outcomes: dict[str, int] = {}
    for trial in range(TRIALS):
        sid = f"t-{trial}"
        approved(store, sid)
        effect_file = tmp_path / f"effect-{trial}.log"
        barrier = threading.Barrier(4)
        results: list[str] = []

        def attempt(
            effect_file: Path = effect_file,
            sid: str = sid,
            barrier: threading.Barrier = barrier,
            results: list[str] = results,
        ) -> None:
            team = build_change_graph(append_effect(str(effect_file)))  # type: ignore[arg-type]
            barrier.wait()
            try:
                with store.resume(sid) as s:
                    team.prompt().session(s).call()
                results.append("ran")
            except SessionBusyError:
                results.append("busy")
            except NothingToResumeError:
                results.append("done")

        threads = [threading.Thread(target=attempt) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results.count("ran") == 1, results
        assert lines(effect_file) == 1
        assert store.load(sid).ledger["change-001/execute"].status == "completed"
        for r in results:
            outcomes[r] = outcomes.get(r, 0) + 1
    store.close()
    assert outcomes["ran"] == TRIALS and outcomes.get("busy", 0) > 0


@pytest.fixture(scope="module")
def pool() -> Any:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as p:
        yield p


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_processes_resuming_one_session_exactly_one_runs(
    kind: str, tmp_path: Path, pool: Any
) -> None:
    target = target_for(kind, tmp_path)
    store = open_target(kind, target)
    tally: dict[str, int] = {}
    for trial in range(TRIALS):
        sid = f"p-{trial}"
        approved(store, sid)
        effect_file = tmp_path / f"peffect-{trial}.log"
        results = pool.starmap(resume_change, [(target, sid, str(effect_file))] * 3)
        assert results.count("ran") == 1, results
        assert set(results) <= {"ran", "SessionBusyError", "NothingToResumeError"}
        assert lines(effect_file) == 1
        for r in results:
            tally[r] = tally.get(r, 0) + 1
    store.close()
    assert tally["ran"] == TRIALS


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_sigkill_mid_resume_never_loses_a_decision_or_repeats_an_effect(
    kind: str, tmp_path: Path
) -> None:
    target = target_for(kind, tmp_path)
    store = open_target(kind, target, lease_ms=300)
    rng = random.Random(20261129)
    seen: dict[str, int] = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def start(sid: str, effect_file: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "intermission.testing.workers", target, sid,
             str(effect_file), "300", "0.2"],
            stdout=subprocess.DEVNULL, env=env,
        )  # fmt: skip

    # calibrate: how long an uninterrupted child lives, so kills land anywhere in it
    approved(store, "calibrate")
    began = time.monotonic()
    start("calibrate", tmp_path / "calibrate.log").wait()
    lifetime = time.monotonic() - began
    for trial in range(CRASH_TRIALS):
        sid = f"k-{trial}"
        approved(store, sid)
        effect_file = tmp_path / f"keffect-{trial}.log"
        child = start(sid, effect_file)
        time.sleep(rng.uniform(0.0, lifetime))
        child.send_signal(signal.SIGKILL)
        child.wait()
        s = store.load(sid)  # still loadable
        assert s.context.get("approval.decision") == "APPROVE"  # no decision lost
        time.sleep(0.35)  # let a dead owner's claim lapse
        team = build_change_graph(append_effect(str(effect_file)))  # type: ignore[arg-type]
        try:
            with store.resume(sid) as again:
                team.prompt().session(again).call()
            outcome = "resumed"
        except NothingToResumeError:
            outcome = "child finished"
        except EffectOutcomeUnknownError:
            outcome = "outcome unknown"
        seen[outcome] = seen.get(outcome, 0) + 1
        final = store.load(sid)
        entry = final.ledger.get("change-001/execute")
        assert lines(effect_file) <= 1  # never twice
        if entry is not None and entry.status == "completed":
            assert lines(effect_file) == 1
        if outcome == "outcome unknown":
            assert entry is not None and entry.status == "started"
    store.close()
    print("crash outcomes:", seen)
    assert sum(seen.values()) == CRASH_TRIALS
    assert len(seen) >= 2  # kills landed both before and after the effect
