"""Issue 27.4: listings survive bad rows, and a session stuck on an effect of unknown outcome
is listed as needing a person and resolved from the CLI (the AG-UI route and the console
are in tests/agui/test_listings.py and tests/browser/test_console.py).

Before: one row cut short or written by another schema version made ``GET /interrupts``
answer 503 (the console showed nothing) and a damaged column crashed ``pending``; a session
whose effect started and never ended was pending with no interrupt, listed by nothing, and
could be resolved from Python only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn
from tests.faults._helpers import lines
from tests.faults._race_agents import ops_agent

from intermission import InMemoryAgentSession, NothingToResolveError, SessionBusyError
from intermission.examples import build_change_graph
from intermission.principals import os_principal
from intermission.stores import SQLiteStore, StuckSession, resolve_unknown_effect
from intermission.testing.conformance import paused_change

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "tests.faults._race_agents:AGENTS"
KEY = "change-001/execute"
THREADS = 300


def cli(*args: str, effects: Path) -> subprocess.CompletedProcess[str]:
    # (this checkout's src first: an intermission installed from elsewhere is not the one
    # that wrote the store)
    path = os.pathsep.join([str(ROOT), str(ROOT / "src")])
    env = {**os.environ, "PYTHONPATH": path, "IM_EFFECT_FILE": str(effects)}
    return subprocess.run(
        [sys.executable, "-m", "intermission", "--agents", AGENTS, *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


def _store(kind: str, tmp_path: Path) -> tuple[Any, str]:
    if kind == "sqlite":
        path = str(tmp_path / "s.db")
        return SQLiteStore(path, synchronous="NORMAL"), path
    return fresh_pg(), pg_dsn()


def damage(store: Any, sid: str, how: str) -> None:
    """Damage one stored row as a hand edit or another program would."""
    sql = {
        "cut": "UPDATE im_sessions SET snapshot = substr(snapshot, 1, 200) WHERE id = ?",
        # as a newer intermission writes its rows (the stamp says which schema)
        "newer": "UPDATE im_sessions SET snapshot = replace(snapshot, '\"schema_version\":1', "
        "'\"schema_version\":2'), snapshot_schema = 2 WHERE id = ?",
        # an edit that keeps the length: only a load can tell
        "edited": "UPDATE im_sessions SET snapshot = replace(snapshot, '\"schema_version\":1', "
        "'\"schema_version\":7') WHERE id = ?",
        "tasks": "UPDATE im_sessions SET tasks = substr(tasks, 1, 20) WHERE id = ?",
    }[how]
    with store._tx() as run:
        assert run(sql, (sid,)).rowcount == 1


def paused_threads(store: Any, n: int, prefix: str = "t") -> list[str]:
    ids = [f"{prefix}{i:04d}" for i in range(n)]
    agent = ops_agent()
    for sid in ids:
        s = InMemoryAgentSession(sid)
        agent.prompt("delete 1001").session(s).call()
        store.save(s)
    return ids


def every_page(store: Any, limit: int = 64) -> tuple[list[str], dict[str, str]]:
    listed: list[str] = []
    unreadable: dict[str, str] = {}
    page = store.pending(limit=limit)
    while page or page.unreadable:
        listed += [p.session_id for p in page]
        unreadable.update((u.session_id, u.why) for u in page.unreadable)
        page = store.pending(limit=limit, before=page.last)
    return listed, unreadable


# -- unreadable rows ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_one_unreadable_row_is_reported_and_never_hides_the_others(
    kind: str, tmp_path: Path
) -> None:
    store, target = _store(kind, tmp_path)
    effects = tmp_path / "effects"
    try:
        ids = paused_threads(store, THREADS)
        cut, newer, bad_tasks = ids[10], ids[150], ids[299]
        damage(store, cut, "cut")
        damage(store, newer, "newer")
        damage(store, bad_tasks, "tasks")
        listed, unreadable = every_page(store)
        assert sorted(unreadable) == sorted([cut, newer])
        assert "shorter than the one saved" in unreadable[cut]
        assert "snapshot schema 2" in unreadable[newer] and "upgrade" in unreadable[newer]
        assert sorted(listed) == sorted(set(ids) - {cut, newer})  # each once, in order
        assert listed == sorted(listed, reverse=True)
        # the CLI lists the other 297 and says which rows it could not read, and why
        out = cli("pending", "--limit", "1000", "--store", target, effects=effects)
        assert out.returncode == 0, out.stderr
        rows = [line.split()[0] for line in out.stdout.splitlines()[1:] if line[:1] == "t"]
        assert sorted(rows) == sorted(set(ids) - {cut, newer, bad_tasks})
        assert f"unreadable: {cut}: its stored snapshot is" in out.stdout
        assert f"unreadable: {newer}: written with snapshot schema 2" in out.stdout
        assert f"unreadable: {bad_tasks}: tasks: the stored tasks of session" in out.stdout
        assert "Traceback" not in out.stderr
        # show says what is wrong with the one asked for, in one line
        show = cli("show", cut, "--store", target, effects=effects)
        assert show.returncode == 2 and show.stderr.startswith("error: ")
        assert "Traceback" not in show.stderr
    finally:
        store.close()


# -- stuck on an effect of unknown outcome -----------------------------------------------
def crashed_mid_effect(store: Any, sid: str, key: str = KEY) -> None:
    """Leave ``key`` started and never ended, as a holder killed inside the effect does."""
    copy = store.load(sid)
    assert copy._ledger_start(key) is None


def test_a_stuck_session_is_listed_resolved_under_the_claim_and_resumable(
    make_store: Any,
) -> None:
    store = make_store()
    runs: list[str] = []

    def effect(change_id: str) -> str:
        runs.append(change_id)
        return "applied again"

    for sid in ("fx", "fy"):
        store.save(paused_change(sid))
        crashed_mid_effect(store, sid)
    stuck = store.stuck()
    assert [(s.session_id, s.agent, s.status, s.key) for s in stuck] == [
        ("fx", "change", "pending", KEY), ("fy", "change", "pending", KEY),
    ]  # fmt: skip
    assert isinstance(stuck[0], StuckSession) and KEY in stuck[0].why
    with store.claim("fx"):  # someone holds it: the effect may be running right now
        assert [s.session_id for s in store.stuck()] == ["fy"]
        with pytest.raises(SessionBusyError):
            resolve_unknown_effect(store, "fx", KEY, result="x", reviewer="ann")
    with pytest.raises(NothingToResolveError, match="was never started"):
        resolve_unknown_effect(store, "fx", "no-such-effect", forget=True)
    # resolved: it happened; the resume takes the recorded result and runs nothing
    s = resolve_unknown_effect(store, "fx", KEY, result="applied by hand", reviewer="ann")
    assert s.ledger[KEY].status == "completed" and store.load("fx").ledger[KEY].result == (
        "applied by hand"
    )
    (record,) = store.load("fx").context.get("effects.resolved")
    assert (record["key"], record["outcome"], record["reviewer"]) == (KEY, "completed", "ann")
    with pytest.raises(NothingToResolveError, match="is completed"):
        resolve_unknown_effect(store, "fx", KEY, forget=True)
    assert [s.session_id for s in store.stuck()] == ["fy"]
    with store.resume("fx") as s:
        s.context.put("approval.decision", "APPROVE")
        build_change_graph(effect).prompt().session(s).call()
    assert runs == [] and store.load("fx").context.get("change.result") == "applied by hand"
    # forgotten: it did not happen; the resume runs it, once
    resolve_unknown_effect(store, "fy", KEY, forget=True, reviewer="bo")
    assert store.stuck() == []
    with store.resume("fy") as s:
        s.context.put("approval.decision", "APPROVE")
        build_change_graph(effect).prompt().session(s).call()
    assert runs == ["change-001"] and store.load("fy").status == "done"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_cli_lists_a_stuck_session_and_resolves_or_forgets_its_effect(
    kind: str, tmp_path: Path
) -> None:
    store, target = _store(kind, tmp_path)
    effects = tmp_path / "effects"
    try:
        for sid in ("stuck-a", "stuck-b"):
            store.save(paused_change(sid))
            crashed_mid_effect(store, sid)
        listing = cli("pending", "--store", target, effects=effects)
        assert listing.returncode == 0, listing.stderr
        for sid in ("stuck-a", "stuck-b"):
            assert f"needs a person: {sid} (change, pending): effect '{KEY}' started" in (
                listing.stdout
            )
            assert f"python -m intermission resolve {sid} {KEY} --result JSON" in listing.stdout
        # approving runs into the unknown effect: refused, nothing runs
        refused = cli("approve", "stuck-a", "--store", target, effects=effects)
        assert refused.returncode == 2, refused.stderr
        assert f"`python -m intermission resolve stuck-a {KEY} --result JSON`" in refused.stderr
        bad = cli("resolve", "stuck-a", KEY, "--result", "{nope", "--store", target,
                  effects=effects)  # fmt: skip
        assert bad.returncode == 2 and bad.stderr.startswith("error: --result is JSON")
        done = cli("resolve", "stuck-a", KEY, "--result", '"applied by hand"', "--reviewer",
                   "alice", "--store", target, effects=effects)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"effect {KEY} of session stuck-a recorded as completed")
        again = cli("forget", "stuck-a", KEY, "--store", target, effects=effects)
        assert again.returncode == 2 and "nothing to resolve" in again.stderr
        show = cli("show", "stuck-a", "--store", target, effects=effects)
        # (the OS user records it; --reviewer is the display name beside it)
        me = os_principal().name
        assert f"effect:   {KEY} completed (completed by hand, by alice ({me}))" in show.stdout
        forgot = cli("forget", "stuck-b", KEY, "--reviewer", "bob", "--store", target,
                     effects=effects)  # fmt: skip
        assert forgot.returncode == 0 and "forgotten: its next run runs it again" in forgot.stdout
        listing = cli("pending", "--store", target, effects=effects)
        assert "needs a person" not in listing.stdout
        # both are resumable now: the resolved effect does not run again, the forgotten one does
        for sid in ("stuck-a", "stuck-b"):
            approved = cli("approve", sid, "--reviewer", "carol", "--store", target,
                           effects=effects)  # fmt: skip
            assert approved.returncode == 0, approved.stderr
            assert approved.stdout.startswith(f"session {sid} done")
        assert lines(effects) == 1
        assert store.load("stuck-a").context.get("change.result") == "applied by hand"
    finally:
        store.close()


# -- found by the adversarial pass -------------------------------------------------------
def damage_ledger(store: Any, sid: str, key: str = KEY) -> None:
    """Cut the stored ledger entry of ``key`` short, as a hand edit would."""
    family = store.load(sid).ledger_id
    with store._tx() as run:
        sql = "UPDATE im_ledger SET entry = substr(entry, 1, 12) WHERE session_id = ? AND key = ?"
        assert run(sql, (family, key)).rowcount == 1


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_damaged_ledger_entry_is_listed_and_never_blanks_the_stuck_listing(
    kind: str, tmp_path: Path
) -> None:
    """Before: one stuck effect's ledger row cut short made ``store.stuck()`` raise a bare
    JSONDecodeError, so ``pending`` ended in a traceback (exit 1) and ``GET /interrupts``
    answered 500: the console showed nothing, the good stuck session included."""
    from starlette.testclient import TestClient

    from intermission.agui import agui_app

    store, target = _store(kind, tmp_path)
    try:
        for sid in ("bad", "good"):
            store.save(paused_change(sid))
            crashed_mid_effect(store, sid)
        damage_ledger(store, "bad")
        stuck = {s.session_id: s for s in store.stuck()}
        assert sorted(stuck) == ["bad", "good"]
        assert stuck["good"].damage is None and stuck["bad"].key == KEY
        assert stuck["bad"].damage and "cannot be read" in stuck["bad"].why
        out = cli("pending", "--store", target, effects=tmp_path / "effects")
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        assert f"needs a person: bad (change, pending): the ledger entry of effect '{KEY}'" in (
            out.stdout
        )
        assert f"python -m intermission resolve good {KEY}" in out.stdout
        assert "resolve bad" not in out.stdout  # nothing to resolve until it is fixed
        with TestClient(agui_app({}, store), base_url="http://127.0.0.1") as client:
            answer = client.get("/interrupts")
        assert answer.status_code == 200, answer.text
        listed = {s["threadId"]: s for s in answer.json()["stuck"]}
        assert sorted(listed) == ["bad", "good"] and "cannot be read" in listed["bad"]["why"]
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_claim_on_a_row_that_cannot_be_read_is_not_kept(kind: str, tmp_path: Path) -> None:
    """Before: the claim's UPDATE committed, then the row failed to parse, and nobody knew
    the claim's token: once the row was repaired the session answered SessionBusyError
    (THREAD_BUSY, resolve, approve) for the whole lease (5 minutes)."""
    from intermission import SnapshotError

    store, _ = _store(kind, tmp_path)
    try:
        store.save(paused_change("s"))
        store.save(paused_change("t"))
        crashed_mid_effect(store, "t")
        with store._tx() as run:
            (text,) = run("SELECT snapshot FROM im_sessions WHERE id = 's'").fetchone()
        damage(store, "s", "edited")
        damage_ledger(store, "t")
        for sid in ("s", "t"):
            for _ in range(2):  # (the second time too: not SessionBusyError)
                with pytest.raises(SnapshotError):
                    with store.claim(sid):
                        pass
            assert store._holder(sid) is None
        with store._tx() as run:  # repaired by hand
            run("UPDATE im_sessions SET snapshot = ? WHERE id = 's'", (text,))
            run("DELETE FROM im_ledger WHERE key = ?", (KEY,))
        for sid in ("s", "t"):
            with store.claim(sid) as s:
                assert s.session_id == sid
    finally:
        store.close()


def test_an_effect_a_fork_is_running_cannot_be_resolved_through_its_sibling(
    make_store: Any,
) -> None:
    """A fork shares its family's ledger, so ``show`` on the original lists the effect the
    fork is running as started ("resolve or forget it"). Before: ``forget`` through the
    original claimed only the original, so it went through while the fork's holder ran the
    effect — and the original's next resume ran it a second time."""
    import threading

    store = make_store()
    store.save(paused_change("orig"))
    store.fork("orig", "fork")
    runs: list[str] = []
    entered, gate = threading.Event(), threading.Event()

    def effect(who: str) -> str:
        runs.append(who)
        entered.set()
        gate.wait(60)
        return f"done by {who}"

    def run_in_fork() -> None:
        with store.claim("fork") as s:
            s.once(KEY, lambda: effect("fork"))

    worker = threading.Thread(target=run_in_fork)
    worker.start()
    try:
        assert entered.wait(60)
        assert store.load("orig").ledger[KEY].status == "started"
        for how in ({"forget": True}, {"result": "by hand"}):
            with pytest.raises(SessionBusyError, match="'fork'"):
                resolve_unknown_effect(store, "orig", KEY, reviewer="ann", **how)
        assert store._holder("orig") is None
    finally:
        gate.set()
        worker.join(60)
    with store.claim("orig") as s:
        assert s.once(KEY, lambda: effect("orig")) == "done by fork"
    assert runs == ["fork"]
    # the fork's holder gone mid-effect: resolvable through either, while nobody holds it
    store.fork("orig", "fork2")
    crashed = store.load("fork2")
    assert crashed._ledger_start("other/key") is None
    s = resolve_unknown_effect(store, "orig", "other/key", forget=True, reviewer="ann")
    assert s.ledger["other/key"].status == "failed"


def test_effects_running_now_hide_no_stuck_session(make_store: Any) -> None:
    """``stuck(limit)`` read the first ``limit`` started ledger entries and only then left
    out those running now (their session held). Before: with as many effects running as
    the limit (100 for ``GET /interrupts``, 50 for ``pending``), no stuck session was
    listed at all — here 6 running, ``limit=2``: none of the 2 stuck ones."""
    from contextlib import ExitStack

    store = make_store()
    with ExitStack() as running:
        for i in range(8):
            s = paused_change(f"s{i}")
            s.family = f"family-{i:016x}"  # (the running ones' entries come first)
            store.save(s)
            if i < 6:
                held = running.enter_context(store.claim(f"s{i}"))
                assert held._ledger_start(KEY) is None  # started, running now
            else:
                crashed_mid_effect(store, f"s{i}")
        assert [s.session_id for s in store.stuck(limit=2)] == ["s6", "s7"]
        assert [s.session_id for s in store.stuck(limit=1)] == ["s6"]
        assert [s.session_id for s in store.stuck()] == ["s6", "s7"]


def test_an_effect_whose_fork_was_deleted_is_listed_on_its_family(make_store: Any) -> None:
    """A fork shares its family's ledger: an effect it started and never ended stops
    every session of the family that reaches it. Before: once the fork was deleted (it was
    the one listed), ``stuck()`` listed nothing, while the original, approved, stopped on
    it with EffectOutcomeUnknownError — a session needing a person, listed nowhere."""
    from intermission import EffectOutcomeUnknownError

    store = make_store()
    store.save(paused_change("orig"))
    store.fork("orig", "fork")
    crashed_mid_effect(store, "fork")
    assert [s.session_id for s in store.stuck()] == ["fork"]
    store.delete("fork")
    assert [(s.session_id, s.key) for s in store.stuck()] == [("orig", KEY)]
    with pytest.raises(EffectOutcomeUnknownError):
        with store.resume("orig") as s:
            s.effect_wait_s = 0.0  # (no sibling to wait for: it is gone)
            s.context.put("approval.decision", "APPROVE")
            build_change_graph().prompt().session(s).call()
    assert [s.session_id for s in store.stuck()] == ["orig"]
    resolve_unknown_effect(store, "orig", KEY, result="done by hand", reviewer="ann")
    assert store.stuck() == []
    with store.resume("orig") as s:
        s.context.put("approval.decision", "APPROVE")
        build_change_graph().prompt().session(s).call()
    assert store.load("orig").context.get("change.result") == "done by hand"
