"""Issue 13.1 / R39: a stale copy saved late never rolls the ledger back.

The story: an effect fails once (ledger ``failed``); someone loads the session to add a
note; the next resume runs the effect (ledger ``completed``) and dies before its final save,
so the row's version does not move; the note's copy then passes compare-and-set. Before
R39 its save wrote ``failed`` over ``completed`` and the next resume paid again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need_module, pg_dsn
from tests.faults._helpers import (
    EFFECT_KEY,
    approved_effect_session,
    lines,
    resume_effect_in_process,
    tally,
)

from intermission import (
    ConflictError,
    EffectOutcomeUnknownError,
    FlowEngine,
    NothingToResumeError,
)
from intermission.stores import resolve_unknown_effect
from intermission.testing.workers import append_effect, effect_graph

KILL_TRIALS = int(os.environ.get("IM_KILL_TRIALS", 15))  # (more: IM_KILL_TRIALS=200)


class Crash(Exception):
    """The resumer dies after its effect, before its final save."""


def _fail_once(store: Any, sid: str) -> None:
    def broken(change_id: str) -> str:
        raise RuntimeError("payment gateway timed out")

    with pytest.raises(RuntimeError), store.resume(sid) as s:
        FlowEngine().eval(effect_graph(broken), s.context)
    assert store.load(sid).ledger[EFFECT_KEY].status == "failed"


def test_a_stale_copy_saved_after_a_crashed_resume_keeps_the_effect_completed(
    make_store: Any, tmp_path: Path
) -> None:
    store = make_store()
    effect_file = tmp_path / "effect.log"
    approved_effect_session(store, "stale")
    _fail_once(store, "stale")
    note = store.load("stale")  # someone opens the session to add a note
    with pytest.raises(Crash), store.resume("stale") as s:
        FlowEngine().eval(effect_graph(append_effect(str(effect_file))), s.context)
        raise Crash  # the effect ran and was recorded; the final save never happens
    assert lines(effect_file) == 1
    assert store.load("stale").store_version == note.store_version  # the row did not move
    note.context.put("note", "checked with finance")
    store.save(note)  # passes compare-and-set: its other changes are kept (documented)
    after = store.load("stale")
    assert after.ledger[EFFECT_KEY].status == "completed"  # not rolled back to failed
    assert after.context["note"] == "checked with finance"
    assert resume_effect_in_process(store, "stale", effect_file) == "ran"
    final = store.load("stale")
    assert lines(effect_file) == 1 and final.status == "done"
    assert final.context["change.result"] == "applied change-001"  # the recorded result
    tally("stale copy after an error", trials=1, effects=lines(effect_file), expected=1)


def test_a_copy_restored_from_an_old_snapshot_cannot_roll_the_ledger_back(
    make_store: Any, tmp_path: Path
) -> None:
    store = make_store()
    approved_effect_session(store, "snap")
    old = store.load("snap").to_json()  # exported before the effect ran
    effect_file = tmp_path / "effect.log"
    assert resume_effect_in_process(store, "snap", effect_file) == "ran"
    done = store.load("snap")
    store.put_snapshot(old, version=done.store_version)  # put the old snapshot back
    restored = store.load("snap")
    assert restored.status == "pending"  # the snapshot's state is back, as asked…
    assert restored.ledger[EFFECT_KEY].status == "completed"  # …but not its older ledger
    assert resume_effect_in_process(store, "snap", effect_file) == "ran"
    assert lines(effect_file) == 1
    tally("old snapshot put back", trials=1, effects=lines(effect_file), expected=1)


def _target(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "kill.db")
    fresh_pg().close()
    return pg_dsn()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_stale_copy_saved_after_a_sigkilled_resume_never_repeats_the_effect(
    kind: str, tmp_path: Path
) -> None:
    from intermission.stores import open_store

    target = _target(kind, tmp_path)
    store = open_store(target, lease_ms=300)
    rng = random.Random(20261201)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def start(sid: str, effect_file: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "intermission.testing.workers", target, sid,
             str(effect_file), "300", "0.1", "effect", "0.15"],
            stdout=subprocess.DEVNULL, env=env,
        )  # fmt: skip

    approved_effect_session(store, "calibrate")
    began = time.monotonic()
    start("calibrate", tmp_path / "calibrate.log").wait()
    lifetime = time.monotonic() - began
    outcomes: dict[str, int] = {}
    effects = lost = 0
    for trial in range(KILL_TRIALS):
        sid = f"k-{trial}"
        effect_file = tmp_path / f"effect-{trial}.log"
        approved_effect_session(store, sid)
        _fail_once(store, sid)
        note = store.load(sid)
        child = start(sid, effect_file)
        time.sleep(rng.uniform(0.0, lifetime))
        child.send_signal(signal.SIGKILL)
        child.wait()
        time.sleep(0.35)  # the dead holder's claim lapses (nothing renews it)
        note.context.put("note", f"trial {trial}")
        try:
            store.save(note)  # the stale copy, saved late
            outcome = "note saved"
        except ConflictError:
            outcome = "note refused (the resume had saved)"
        if store.load(sid).context.get("approval.decision") != "APPROVE":
            lost += 1
        recovered = _recover(store, sid, effect_file)
        outcomes[f"{outcome}, {recovered}"] = outcomes.get(f"{outcome}, {recovered}", 0) + 1
        final = store.load(sid)
        assert final.status == "done" and final.ledger[EFFECT_KEY].status == "completed"
        assert lines(effect_file) == 1, (trial, outcome, recovered)
        effects += lines(effect_file)
    store.close()
    print("stale-copy kill outcomes:", outcomes)
    assert lost == 0
    assert any(k.startswith("note saved") for k in outcomes)  # the dangerous order happened
    tally(
        f"stale copy after SIGKILL ({kind})",
        trials=KILL_TRIALS, effects=effects, expected=KILL_TRIALS,
    )  # fmt: skip


def _recover(store: Any, sid: str, effect_file: Path) -> str:
    """What an operator does after a crash: resume; when the effect's outcome is unknown,
    look at the world, record what happened, and resume again."""
    try:
        return "resumed" if resume_effect_in_process(store, sid, effect_file) == "ran" else "done"
    except NothingToResumeError:
        return "child finished"
    except EffectOutcomeUnknownError:
        s = store.load(sid)
        if lines(effect_file):  # it did happen: record it by hand
            s.resolve_effect(EFFECT_KEY, "applied change-001")
            verdict = "unknown → resolved"
        else:  # it did not: let the next resume run it — forgetting an approved effect
            # reopens its approval (R60), so the operator forgets it under the claim and the
            # reviewer approves it again
            resolve_unknown_effect(store, sid, EFFECT_KEY, forget=True, reviewer="alice")
            with store.claim(sid) as again:
                again.context.put("approval.decision", "APPROVE")
                again.context.put("approval.operator", "alice")
            verdict = "unknown → forgotten"
        assert resume_effect_in_process(store, sid, effect_file) == "ran"
        return verdict


OPS_SERVER = Path(__file__).resolve().parents[1] / "mcp_ops_server.py"


def test_a_copy_of_a_deleted_session_never_reruns_its_approved_mcp_call(
    make_store: Any, tmp_path: Path
) -> None:
    """A view holds session R while its approved ``delete_user`` is pending; R runs it, is
    deleted (its family's ledger goes) and a new session is saved as R, at version 1 again.
    The view's copy, saved late, is refused: the old R does not come back to send
    ``delete_user`` a second time (adversary repro 05)."""
    need_module("mcp", "the mcp extra (pip install intermission[mcp])")
    from intermission import (
        HITL,
        HITLDecision,
        HITLInterceptor,
        InMemoryAgentSession,
        ReActAgent,
        ScriptedModel,
        ToolCall,
        mcp_tools,
    )

    store, counts = make_store(), tmp_path / "counts.jsonl"

    def script(messages: list[Any], _info: Any) -> Any:
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        done = any(m.role == "tool" for m in messages[last:])
        return "Done." if done else [ToolCall("delete_user", {"user_id": 7})]

    env = {"MCP_COUNT_FILE": str(counts)}
    with mcp_tools(command=[sys.executable, str(OPS_SERVER)], env=env) as tools:
        agent = (
            ReActAgent.of(ScriptedModel(script)).name("ops").tools(*tools)
            .interceptor(HITLInterceptor().on_destructive()).build()
        )  # fmt: skip
        s = InMemoryAgentSession.of("R")
        agent.prompt("delete user 7").session(s).call()
        (task,) = HITL.pending_tasks(s)
        HITL.submit(s, task, HITLDecision.approve().reviewer("alice"), agent=agent)
        store.save(s)
        stale = store.load("R")
        with store.resume("R") as running:
            agent.prompt().session(running).call()
        store.delete("R")
        new = InMemoryAgentSession.of("R")
        new.context.put("owner", "bob")
        store.save(new)
        with pytest.raises(ConflictError) as info:
            store.save(stale)
        assert info.value.replaced
        assert store.load("R").context.get("owner") == "bob"
        with pytest.raises(NothingToResumeError), store.resume("R") as again:
            agent.prompt().session(again).call()
    calls = [json.loads(line)["tool"] for line in counts.read_text().splitlines()]
    assert calls.count("delete_user") == 1


_DIES_MID_EFFECT = """
import os, sys
from intermission import FlowEngine
from intermission.stores import open_store
from intermission.testing.workers import effect_graph

store = open_store(sys.argv[1], lease_ms=300)
with store.resume(sys.argv[2]) as s:  # the process dies once 'started' is durable
    FlowEngine().eval(effect_graph(lambda change_id: os._exit(0)), s.context)
"""


def test_an_approved_effect_that_never_happened_is_forgotten_under_its_approval(
    tmp_path: Path,
) -> None:
    # the branch of _recover a SIGKILL reaches only by luck (killed between the ledger's
    # 'started' and the effect): forgetting reopens the approval, which is approved again,
    # and the effect then runs once
    from intermission.stores import open_store

    target = str(tmp_path / "s.sqlite")
    store = open_store(target, lease_ms=300)
    approved_effect_session(store, "k")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", _DIES_MID_EFFECT, target, "k"], env=env,
                   check=True, timeout=120)  # fmt: skip
    time.sleep(0.35)  # the dead holder's claim lapses
    assert store.load("k").ledger[EFFECT_KEY].status == "started"
    effect_file = tmp_path / "effect.log"
    assert _recover(store, "k", effect_file) == "unknown → forgotten"
    final = store.load("k")
    assert final.status == "done" and final.ledger[EFFECT_KEY].status == "completed"
    assert lines(effect_file) == 1
    assert "effect.forgotten" in [r.action for r in store.audit("k")]
    store.close()
