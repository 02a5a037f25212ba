"""R61, part 1: a rejection or a skip never runs the effect, whichever surface decided and
whichever path resumes — on SQLite and on PostgreSQL.

The agent ``paths`` (tests/hitl/_paths_agents.py) asks, in one model turn, for
``wipe(a)`` (call ``a``) and ``archive(b)`` (call ``b``), both gated. Call ``a`` is
rejected or skipped on one surface — the Python API (``HITL.submit``), the CLI
(``intermission reject`` as a subprocess), or its deadline, recorded by ``intermission
sweep`` — and the session is saved. Call ``b`` is then approved and the session resumed
on another path: ``prompt()`` in Python, ``intermission approve`` or ``intermission
resume``, ``decide_and_resume``, an AG-UI run (``serve`` as a subprocess, real HTTP), or
a fork of the stored session. What ran is read from the file the tools themselves append
to: ``wipe a`` never, ``archive b`` exactly once. The AG-UI server and its console take a
resume covering every open interrupt, and a notebook panel's buttons record a batch once
every call is chosen: those decide both calls in one go and resume themselves."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests._helpers import need_module
from tests.hitl._paths import World, agent_of, open_world
from tests.hitl._paths_agents import lines

from intermission import HITL, HITLDecision, InMemoryAgentSession
from intermission.stores import decide_and_resume


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with open_world(request.param, tmp_path_factory.mktemp(f"paths-{request.param}")) as w:
        yield w


def paused(world: World, agent: str) -> str:
    """A new session of ``agent``, paused on calls ``a`` and ``b`` and saved."""
    sid = f"{agent}-{uuid.uuid4().hex[:10]}"
    s = InMemoryAgentSession.of(sid)
    agent_of(agent).prompt(f"clean up for {sid}").session(s).call()
    assert [t.call_uuid for t in s.hitl.tasks] == ["a", "b"] and not s.hitl.decisions
    world.store.save(s)
    return sid


# -- the surfaces that decide call ``a`` (reject, skip, expire) ---------------------------
def decide_by_api(world: World, agent: str, sid: str, verdict: str) -> None:
    s = world.store.load(sid)
    d = HITLDecision.reject("not this disk") if verdict == "reject" else HITLDecision.skip()
    HITL.submit(s, "a", d)
    world.store.save(s)


def decide_by_cli(world: World, agent: str, sid: str, verdict: str) -> None:
    assert verdict == "reject"  # (the CLI approves or rejects)
    out = world.cli("reject", sid, "--call", "a", "--reason", "not this disk")
    assert out.returncode == 0, out.stderr
    assert world.store.load(sid).is_pending  # ``b`` still waits


def decide_by_sweep(world: World, agent: str, sid: str, verdict: str) -> None:
    assert verdict == "expire" and agent == "paths_expiring"
    (task, _) = world.store.load(sid).hitl.tasks
    while time.time() * 1000 <= task.deadline_ms:  # (the deadline falls due first)
        time.sleep(0.05)
    out = world.cli("sweep")
    assert out.returncode == 0, out.stderr
    record = world.store.load(sid).hitl.decisions["a"]
    assert record.via == "system" and record.timed_out, record  # the sweeper expired it


DECIDERS = {"api": decide_by_api, "cli": decide_by_cli, "sweep": decide_by_sweep}


# -- the paths that approve call ``b`` and resume ----------------------------------------
def resume_by_prompt(world: World, agent: str, sid: str) -> None:
    with world.store.resume(sid) as s:
        HITL.submit(s, "b", HITLDecision.approve())
        agent_of(agent).prompt().session(s).call()


def resume_by_cli_approve(world: World, agent: str, sid: str) -> None:
    out = world.cli("approve", sid, "--call", "b")
    assert out.returncode == 0, out.stderr


def resume_by_cli_resume(world: World, agent: str, sid: str) -> None:
    s = world.store.load(sid)
    HITL.submit(s, "b", HITLDecision.approve())
    world.store.save(s)
    out = world.cli("resume", sid)
    assert out.returncode == 0, out.stderr


def resume_by_decide_and_resume(world: World, agent: str, sid: str) -> None:
    decide_and_resume(
        world.store, sid, lambda s: HITL.submit(s, "b", HITLDecision.approve()), agent_of
    )


def resume_by_agui(world: World, agent: str, sid: str) -> None:
    last = world.agui(agent, sid, {"b": {"approved": True}})
    assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "success", last


def resume_by_fork(world: World, agent: str, sid: str) -> str:
    # a fork is the session as it stood at a checkpoint: one taken at the pause the
    # decision came after holds no decision on ``a`` — approving ``b`` there leaves it
    # waiting for ``a`` (a rejection never becomes the fork's approval; the CLI resumed
    # after deciding, so its checkpoint holds the rejection, applied here) ...
    early = world.store.load(sid).fork(f"{sid}~early")
    carried = "a" in early.hitl.decisions
    HITL.submit(early, "b", HITLDecision.approve())
    agent_of(agent).prompt().session(early).call()
    if not carried and agent == "paths":  # (a deadline passed on the fork too: expired)
        assert early.is_pending and "a" not in early.hitl.decisions
    assert "wipe a" not in lines(world.effects, sid)
    # ... and once a resume of the session applied what was decided (it waits for ``b``
    # again), a fork of it carries the decision
    with world.store.resume(sid) as s:
        agent_of(agent).prompt().session(s).call()
        assert s.is_pending
    fork = world.store.load(sid).fork(f"{sid}~fork")
    HITL.submit(fork, "b", HITLDecision.approve())
    agent_of(agent).prompt().session(fork).call()
    world.store.save(fork)
    return fork.session_id


RESUMERS = {"prompt": resume_by_prompt, "cli-approve": resume_by_cli_approve,
            "cli-resume": resume_by_cli_resume, "decide_and_resume": resume_by_decide_and_resume,
            "agui": resume_by_agui, "fork": resume_by_fork}  # fmt: skip


def decision_on_a(world: World, sid: str) -> Any:
    s = world.store.load(sid)
    record = s.hitl.decisions.get("a")
    assert record is not None, f"call a was not decided: {s.hitl}"
    return record


CASES = [("api", "reject"), ("api", "skip"), ("cli", "reject"), ("sweep", "expire")]


@pytest.mark.parametrize("path", list(RESUMERS))
@pytest.mark.parametrize(("surface", "verdict"), CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_a_refused_call_never_runs_whoever_decided_and_whatever_resumes(
    world: World, surface: str, verdict: str, path: str
) -> None:
    agent = "paths_expiring" if verdict == "expire" else "paths"
    sid = paused(world, agent)
    DECIDERS[surface](world, agent, sid, verdict)
    record = decision_on_a(world, sid)
    assert record.verdict == ("reject" if verdict == "expire" else verdict), record
    assert lines(world.effects, sid) == ["think 0"]  # decided; nothing ran yet
    done = RESUMERS[path](world, agent, sid) or sid
    assert world.store.load(done).status == "done"
    ran = lines(world.effects, sid)
    assert "wipe a" not in ran and ran.count("archive b") == 1, ran


@pytest.mark.parametrize("via", ["agui", "console"])
def test_a_rejection_over_agui_never_runs(world: World, via: str) -> None:
    """The AG-UI server and its console (which resumes through the same run endpoint,
    saying ``via: console``) decide every open interrupt in one request."""
    sid = paused(world, "paths")
    last = world.agui("paths", sid, {"a": {"approved": False, "reason": "not this disk"},
                                     "b": {"approved": True}}, via=via)  # fmt: skip
    assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "success", last
    (decided,) = [e for e in world.store.load(sid).events
                  if e.kind == "hitl_decided" and e.call_uuid == "a"]  # fmt: skip
    assert decided.decision.verdict == "reject"
    ran = lines(world.effects, sid)
    assert "wipe a" not in ran and ran.count("archive b") == 1, ran


@pytest.mark.parametrize("verdict", ["reject", "skip"])
def test_a_rejection_or_skip_by_a_notebook_button_never_runs(world: World, verdict: str) -> None:
    """An HITLPanel keeps a choice on one call of a batch until every call is chosen, then
    records them all and resumes: its buttons decide and resume in one go."""
    need_module("anywidget", "the notebook extra (pip install 'intermission[notebook]')")
    from intermission.notebook import HITLPanel

    sid = paused(world, "paths")
    panel = HITLPanel(agent_of("paths"), world.store.load(sid), store=world.store)
    try:
        panel.click("decide", call_uuid="a", verdict=verdict, reason="not this disk")
        assert world.store.load(sid).hitl.decisions == {}  # (kept in the panel so far)
        panel.click("decide", call_uuid="b", verdict="approve")
        panel.runner.wait()
    finally:
        panel.close()
    (decided,) = [e for e in world.store.load(sid).events
                  if e.kind == "hitl_decided" and e.call_uuid == "a"]  # fmt: skip
    assert decided.decision.verdict == verdict and world.store.load(sid).status == "done"
    ran = lines(world.effects, sid)
    assert "wipe a" not in ran and ran.count("archive b") == 1, ran


def test_a_finished_rejection_stays_finished_on_every_path(world: World) -> None:
    """A session whose only gated call was rejected and applied: no path runs it later —
    ``resume`` and ``approve`` refuse (exit 2, nothing changed), an AG-UI run has nothing
    open, a fork has nothing to resume."""
    sid = paused(world, "paths")
    with world.store.resume(sid) as s:
        HITL.submit(s, "a", HITLDecision.reject("no"))
        HITL.submit(s, "b", HITLDecision.reject("no"))
        agent_of("paths").prompt().session(s).call()
    for args in (["resume", sid], ["approve", sid], ["approve", sid, "--call", "a"]):
        out = world.cli(*args)
        assert out.returncode == 2 and out.stderr.startswith("error: "), (args, out)
    last = world.agui("paths", sid, {"a": {"approved": True}})
    assert last["type"] == "RUN_ERROR", last
    after = world.store.load(sid)
    assert after.status == "done" and not after.hitl.tasks and not after.hitl.decisions
    ran = lines(world.effects, sid)
    assert "wipe a" not in ran and "archive b" not in ran, ran
