"""R61, part 2: a gated call stays gated whatever shares its model turn, a team member's
approval is the team session's and resumes in place, and an approval is bound to the
arguments it approved.

- A member ``ops`` of the team ``relay`` asks, in one model turn, for ``wipe`` (gated)
  beside any of ``archive`` (gated too), ``nope`` (no such tool) and ``hand_off`` (to the
  member ``billing``), in every order (Hypothesis over the batches and their orders). The
  whole batch waits for the decisions: nothing runs and nobody is handed the work before,
  the hand-off follows the decision, and a rejected or skipped ``wipe`` never runs.
- A member ``lead`` of the team ``crew`` looks (unasked), then asks to wipe: the team
  session lists that approval (``HITL.pending_tasks``, ``store.pending()``, ``intermission
  pending``) and, decided on any path, the member goes on from where it stood — it neither
  looks again nor asks its model again for what it already did.
- An approval is bound to the digest of the arguments it approved: other arguments — a
  model asking again under the same call id, or the stored call rewritten after the
  approval — need an approval of their own, and an edited-args approval of one call
  approves no other call.

What ran is read from the file the tools themselves append to (tests/hitl/_paths_agents.py),
on SQLite and PostgreSQL where a store is involved, with the CLI and ``serve`` as
subprocesses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.hitl._paths import World, agent_of, open_world
from tests.hitl._paths_agents import RELAY_BATCH, lines, relay_team

from intermission import HITL, HITLDecision, InMemoryAgentSession
from intermission.stores import decide_and_resume


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with open_world(request.param, tmp_path_factory.mktemp(f"gated-{request.param}")) as w:
        yield w


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tools' file for the tests without a store."""
    with open_world("sqlite", tmp_path_factory.mktemp("gated-memory")) as w:
        yield w.effects


def new_sid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def verdict_of(verdict: str) -> HITLDecision:
    return {"approve": HITLDecision.approve(), "reject": HITLDecision.reject("not this disk"),
            "skip": HITLDecision.skip()}[verdict]  # fmt: skip


# -- a gated call stays gated whatever shares its turn ------------------------------------
BATCHES = st.sets(st.sampled_from(["archive", "nope", "hand_off"])).flatmap(
    lambda others: st.permutations(["wipe", *sorted(others)])
)


@settings(max_examples=150, deadline=None)
@given(batch=BATCHES, verdict=st.sampled_from(["approve", "reject", "skip"]))
@example(batch=["nope", "wipe"], verdict="approve")  # an unknown call first (agent-framework)
@example(batch=["hand_off", "wipe"], verdict="approve")  # a hand-off in the same turn
@example(batch=list(RELAY_BATCH), verdict="reject")
def test_a_gated_call_stays_gated_whatever_shares_its_turn(
    memory: Path, batch: list[str], verdict: str
) -> None:
    team, sid = relay_team(batch), new_sid("relay")
    s = InMemoryAgentSession.of(sid)
    team.prompt(f"tidy up for {sid}").session(s).call()
    gated = [name for name in batch if name in ("wipe", "archive")]
    assert s.is_pending and [t.tool_name for t in HITL.pending_tasks(s)] == gated
    assert lines(memory, sid) == ["ops thinks 0"]  # nothing ran, nobody was handed the work
    HITL.submit(s, "wipe", verdict_of(verdict))
    if "archive" in batch:
        HITL.submit(s, "archive", HITLDecision.approve())
    team.prompt().session(s).call()
    assert s.status == "done"
    ran = lines(memory, sid)
    # a lone rejected call ends the member's batch; otherwise the batch goes on
    goes_on = verdict != "reject" or "archive" in batch
    handed = "hand_off" in batch and goes_on
    assert ran.count("wipe a") == (verdict == "approve"), ran
    assert ran.count("archive b") == ("archive" in batch), ran
    assert ran.count("hand_off billing") == ran.count("billing ran") == handed, ran
    if handed:  # the hand-off follows the decision: billing works after ops' batch ran
        assert ran.index("billing ran") > ran.index("hand_off billing"), ran


@pytest.mark.parametrize("via", ["cli", "agui"])
def test_a_gated_call_after_an_unknown_tool_and_a_hand_off_stays_gated_when_served(
    world: World, via: str
) -> None:
    """The served ``relay`` asks for nope, hand_off, archive and wipe in one turn; the
    wipe is rejected on the CLI or over AG-UI, the archive approved."""
    sid = new_sid("relay")
    s = InMemoryAgentSession.of(sid)
    agent_of("relay").prompt(f"tidy up for {sid}").session(s).call()
    world.store.save(s)
    (listed,) = [p for p in world.store.pending() if p.session_id == sid]
    assert [t.tool_name for t in listed.tasks] == ["archive", "wipe"]
    assert lines(world.effects, sid) == ["ops thinks 0"]
    if via == "cli":
        out = world.cli("reject", sid, "--call", "wipe", "--reason", "not this disk")
        assert out.returncode == 0, out.stderr
        assert lines(world.effects, sid) == ["ops thinks 0"]  # archive still waits
        out = world.cli("approve", sid, "--call", "archive")
        assert out.returncode == 0, out.stderr
    else:
        last = world.agui("relay", sid, {"wipe": {"approved": False, "reason": "no"},
                                         "archive": {"approved": True}})  # fmt: skip
        assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "success", last
    assert world.store.load(sid).status == "done"
    assert lines(world.effects, sid) == ["ops thinks 0", "hand_off billing", "archive b",
                                         "ops thinks 4", "billing ran"]  # fmt: skip


# -- a member's approval is the team's and resumes in place -------------------------------
IN_PLACE = ["lead thinks 0", "look a", "lead thinks 1", "wipe a", "lead thinks 2"]


def crew_paused(world: World) -> str:
    sid = new_sid("crew")
    s = InMemoryAgentSession.of(sid)
    agent_of("crew").prompt(f"tidy up for {sid}").session(s).call()
    world.store.save(s)
    return sid


@pytest.mark.parametrize("path", ["prompt", "decide_and_resume", "cli", "agui"])
def test_a_member_s_approval_is_listed_by_the_team_and_resumes_in_place(
    world: World, path: str
) -> None:
    sid = crew_paused(world)
    (task,) = HITL.pending_tasks(world.store.load(sid))
    assert (task.agent, task.tool_name, task.args) == ("lead", "wipe", {"target": "a"})
    (listed,) = [p for p in world.store.pending(agent="crew") if p.session_id == sid]
    assert [(t.agent, t.tool_name) for t in listed.tasks] == [("lead", "wipe")]
    out = world.cli("pending", "--agent", "crew")
    assert out.returncode == 0 and f"{sid} " in out.stdout, out
    (row,) = [line for line in out.stdout.splitlines() if line.startswith(f"{sid} ")]
    assert "1 call" in row, row
    out = world.cli("show", sid)
    assert out.returncode == 0 and 'wipe({"target": "a"})' in out.stdout, out
    assert lines(world.effects, sid) == IN_PLACE[:3]
    approve = HITLDecision.approve()
    if path == "prompt":
        with world.store.resume(sid) as s:
            HITL.submit(s, task.call_uuid, approve)
            agent_of("crew").prompt().session(s).call()
    elif path == "decide_and_resume":
        decide_and_resume(world.store, sid, lambda s: HITL.submit(s, task.call_uuid, approve),
                          agent_of)  # fmt: skip
    elif path == "cli":
        out = world.cli("approve", sid)
        assert out.returncode == 0, out.stderr
    else:
        last = world.agui("crew", sid, {task.call_uuid: {"approved": True}})
        assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "success", last
    done = world.store.load(sid)
    assert done.status == "done" and lines(world.effects, sid) == IN_PLACE
    assert done.messages[-1].content == "Done: a holds 3 files; wiped a"


def test_a_member_s_rejection_on_the_cli_never_runs_and_the_member_goes_on(world: World) -> None:
    sid = crew_paused(world)
    out = world.cli("reject", sid, "--reason", "not this disk")
    assert out.returncode == 0, out.stderr
    assert world.store.load(sid).status == "done"
    assert lines(world.effects, sid) == IN_PLACE[:3]  # looked once; never wiped


# -- an approval is bound to the arguments it approved ------------------------------------
def test_a_model_asking_again_with_other_arguments_needs_a_new_approval(world: World) -> None:
    """``again`` asks for wipe(a) as ``c1``; approved, it runs; the model then asks under
    the same provider id for wipe(z): a new call, a new approval."""
    sid = new_sid("again")
    s = InMemoryAgentSession.of(sid)
    agent_of("again").prompt(f"go for {sid}").session(s).call()
    world.store.save(s)
    out = world.cli("approve", sid)
    assert out.returncode == 0, out.stderr
    s = world.store.load(sid)
    (task,) = HITL.pending_tasks(s)
    assert task.call_uuid != "c1" and task.args == {"target": "z"} and s.is_pending
    assert lines(world.effects, sid) == ["think 0", "wipe a", "think 1"]
    out = world.cli("reject", sid, "--reason", "not that one")
    assert out.returncode == 0, out.stderr
    assert world.store.load(sid).status == "done"
    assert "wipe z" not in lines(world.effects, sid)


@pytest.mark.parametrize("path", ["prompt", "cli-resume", "cli-approve"])
def test_a_stored_call_rewritten_after_its_approval_needs_a_new_one(
    world: World, path: str
) -> None:
    """Both calls approved and saved; then the stored session's pending call ``a`` is
    rewritten to other arguments (what would run is no longer what was approved). The
    resume voids that approval and asks again, with the new arguments; nothing runs
    until a new approval, and then only once."""
    sid = new_sid("paths")
    s = InMemoryAgentSession.of(sid)
    agent_of("paths").prompt(f"clean up for {sid}").session(s).call()
    HITL.approve_all(s)
    world.store.save(s)
    s = world.store.load(sid)
    s.traces["paths"].last_reason.tool_calls[0].args["target"] = "evil"  # type: ignore[union-attr]
    world.store.save(s)
    if path == "prompt":
        with world.store.resume(sid) as s:
            agent_of("paths").prompt().session(s).call()
    else:
        out = world.cli("resume", sid)
        assert out.returncode == 0, out.stderr
    s = world.store.load(sid)
    assert s.is_pending and lines(world.effects, sid) == ["think 0"]
    assert [(t.call_uuid, t.args) for t in HITL.pending_tasks(s)] == [("a", {"target": "evil"})]
    assert "b" in s.hitl.decisions  # (the untouched call keeps its approval)
    if path == "cli-approve":
        out = world.cli("approve", sid, "--call", "a")
        assert out.returncode == 0, out.stderr
    else:
        decide_and_resume(world.store, sid, lambda s: HITL.submit(s, "a", HITLDecision.approve()),
                          agent_of)  # fmt: skip
    assert world.store.load(sid).status == "done"
    ran = lines(world.effects, sid)
    assert ran.count("wipe evil") == 1 and "wipe a" not in ran and ran.count("archive b") == 1


def test_an_edited_approval_of_one_call_approves_no_other(world: World) -> None:
    """Call ``a`` approved with its arguments edited to those of call ``b``; ``b`` still
    waits for its own decision, and rejected, never runs."""
    sid = new_sid("paths")
    s = InMemoryAgentSession.of(sid)
    agent_of("paths").prompt(f"clean up for {sid}").session(s).call()
    HITL.submit(s, "a", HITLDecision.approve().modified_args({"target": "b"}))
    world.store.save(s)
    out = world.cli("resume", sid)
    assert out.returncode == 0 and "still waiting: b archive" in out.stdout, out
    s = world.store.load(sid)
    assert [t.call_uuid for t in HITL.pending_tasks(s)] == ["b"]
    out = world.cli("reject", sid, "--call", "b", "--reason", "no")
    assert out.returncode == 0, out.stderr
    ran = lines(world.effects, sid)
    assert ran.count("wipe b") == 1 and "archive b" not in ran and "wipe a" not in ran, ran
