"""A session paused in one process and resumed in another with freshly built agents: the
scripted model goes on where the conversation stopped (R15, R22, R30).

"A new process" here is what it amounts to: every agent and model object is built again and
the session arrives only as its JSON snapshot (or through a store); one test runs two real
interpreters.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests._helpers import TRANSFERS, transfer

from intermission import (
    HITL,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    TeamAgent,
    ToolCall,
)

RAN = TRANSFERS  # every call of the shared transfer tool


def needs_approval(_trace: Any, args: dict[str, Any]) -> str | None:
    return "large transfer" if args["amount"] >= 100 else None


def bank(script: list[Any], name: str = "bank") -> tuple[ReActAgent, ScriptedModel]:
    model = ScriptedModel(script)
    hitl = HITLInterceptor().on_tool("transfer", policy=needs_approval)
    return ReActAgent.of(model).name(name).tools(transfer).interceptor(hitl).build(), model


def in_new_process(session: InMemoryAgentSession) -> InMemoryAgentSession:
    return InMemoryAgentSession.restore(session.to_json())


def test_readme_agent_resumed_in_new_objects_finishes_instead_of_asking_again() -> None:
    RAN.clear()
    script = [[ToolCall("transfer", {"account": "alice", "amount": 500})], "Paid alice."]
    agent, _ = bank(script)
    s = InMemoryAgentSession.of("p")
    assert agent.prompt("pay alice").session(s).call().is_abnormal

    s2 = in_new_process(s)
    agent2, model2 = bank(script)  # a fresh script: it has given no reply yet
    task = HITL.pending_tasks(s2)[0]
    HITL.submit(s2, task, HITLDecision.approve())
    resp = agent2.prompt().session(s2).call()
    assert (resp.content, resp.is_abnormal, s2.is_pending) == ("Paid alice.", False, False)
    assert RAN == [("alice", 500)]
    assert model2.turn == 2 and len(model2.calls) == 1  # asked once, for its second reply


def test_script_continues_across_prompts_after_a_restart() -> None:
    RAN.clear()
    script = [[ToolCall("transfer", {"account": "bob", "amount": 300})], "first", "second"]
    agent, _ = bank(script)
    s = InMemoryAgentSession.of("q")
    agent.prompt("pay bob").session(s).call()
    s = in_new_process(s)
    HITL.approve_all(s)
    agent2, _ = bank(script)
    assert agent2.prompt().session(s).call().content == "first"
    s = in_new_process(s)
    agent3, _ = bank(script)
    assert agent3.prompt("and now?").session(s).call().content == "second"


def test_catch_up_never_moves_a_shared_model_back() -> None:
    # one model object answering on two sessions keeps counting its own replies
    agent, model = bank(["one", "two"])
    assert agent.prompt("a").session(InMemoryAgentSession.of("a")).call().content == "one"
    assert agent.prompt("b").session(InMemoryAgentSession.of("b")).call().content == "two"
    model.catch_up(0)
    assert model.turn == 2


def test_supervisor_resumed_in_new_objects_routes_on() -> None:
    RAN.clear()

    def office() -> tuple[TeamAgent, ScriptedModel]:
        payer, _ = bank([[ToolCall("transfer", {"account": "carol", "amount": 900})], "paid"])
        writer = ReActAgent.of(ScriptedModel(["receipt written"])).name("writer").build()
        boss = ScriptedModel(["bank", "writer", "FINISH"])
        return TeamAgent.supervisor("office", boss, [payer, writer]), boss

    team, _ = office()
    s = InMemoryAgentSession.of("sup")
    first = team.prompt("pay carol, then write the receipt").session(s).call()
    assert s.is_pending and (first.content, first.is_abnormal) == ("large transfer", True)

    s = in_new_process(s)
    HITL.approve_all(s)
    team2, boss2 = office()
    resp = team2.prompt().session(s).call()
    assert resp.content == "receipt written"
    assert [r.agent for r in resp.trace.records] == ["bank", "writer"]
    assert RAN == [("carol", 900)] and boss2.turn == 3


def test_two_real_interpreters_pause_and_resume_through_sqlite(tmp_path: Path) -> None:
    app = textwrap.dedent(
        """
        import sys
        from intermission import (HITL, HITLDecision, HITLInterceptor, InMemoryAgentSession,
                                  ReActAgent, ScriptedModel, ToolCall, tool)
        from intermission.stores import SQLiteStore

        @tool
        def delete_user(user_id: int) -> str:
            '''Delete a user account.'''
            print("tool ran")
            return f"user {user_id} deleted"

        model = ScriptedModel([[ToolCall("delete_user", {"user_id": 1001})], "User 1001 deleted."])
        agent = (ReActAgent.of(model).name("ops").tools(delete_user)
                 .interceptor(HITLInterceptor().on_tool("delete_user")).build())
        store = SQLiteStore(sys.argv[2])
        if sys.argv[1] == "pause":
            s = InMemoryAgentSession.of("s-1")
            print(agent.prompt("delete user 1001").session(s).call().content)
            store.save(s)
        else:
            with store.resume("s-1") as s:
                HITL.submit(s, HITL.pending_tasks(s)[0], HITLDecision.approve())
                print(agent.prompt().session(s).call().content)
            print(store.load("s-1").status)
        """
    )
    (tmp_path / "app.py").write_text(app)
    db = str(tmp_path / "s.db")

    def run(phase: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, str(tmp_path / "app.py"), phase, db],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        return done.stdout.splitlines()

    assert run("pause") == ["Sensitive operation: human confirmation required"]
    assert run("resume") == ["tool ran", "User 1001 deleted.", "done"]


# -- property: restarting at every pause changes nothing ---------------------------------

calls = st.lists(
    st.tuples(st.sampled_from(["alice", "bob"]), st.sampled_from([5, 150])), min_size=1, max_size=3
)


def scripted(turns: list[list[tuple[str, int]]], prefix: str = "t") -> list[Any]:
    script: list[Any] = []
    for i, turn in enumerate(turns):
        args = [{"account": account, "amount": amount} for account, amount in turn]
        script.append([ToolCall("transfer", a, id=f"{prefix}{i}-{j}") for j, a in enumerate(args)])
    return [*script, "done"]


def drive(script: list[Any], restart: bool) -> tuple[str, list[tuple[str, int]], list[str], int]:
    """Run to the end, approving every pause; ``restart``: new objects at every pause."""
    RAN.clear()
    agent, model = bank(script)
    s = InMemoryAgentSession.of("prop")
    resp = agent.prompt("go").session(s).call()
    asked = len(model.calls)
    while s.is_pending:
        if restart:
            s = in_new_process(s)
            agent, model = bank(script)
            asked_before = len(model.calls)
        else:
            asked_before = len(model.calls)
        HITL.approve_all(s)
        resp = agent.prompt().session(s).call()
        asked += len(model.calls) - asked_before
    return resp.content, list(RAN), s.events.kinds(), asked


@settings(max_examples=60, deadline=None)
@given(st.lists(calls, min_size=1, max_size=4))
def test_property_restart_at_every_pause_is_invisible(turns: list[list[tuple[str, int]]]) -> None:
    script = scripted(turns)
    assert drive(script, restart=True) == drive(script, restart=False)
    content, ran, _, asked = drive(script, restart=True)
    assert content == "done" and asked == len(script)
    assert ran == [call for turn in turns for call in turn]  # every call ran exactly once


def team_of(scripts: list[list[Any]]) -> TeamAgent:
    return TeamAgent.sequential("crew", [bank(sc, f"m{i}")[0] for i, sc in enumerate(scripts)])


def drive_team(scripts: list[list[Any]], restart: bool) -> tuple[str, list[Any], list[str]]:
    RAN.clear()
    team = team_of(scripts)
    s = InMemoryAgentSession.of("crew")
    resp = team.prompt("go").session(s).call()
    while s.is_pending:
        assert resp.is_abnormal and resp.content  # a member's approval summary (R19, R17)
        if restart:
            s = in_new_process(s)
            team = team_of(scripts)
        HITL.approve_all(s)
        resp = team.prompt().session(s).call()
    return resp.content, list(RAN), s.events.kinds()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(calls, max_size=2), min_size=1, max_size=3))
def test_property_team_members_resume_in_new_objects(members: list[list[Any]]) -> None:
    scripts = [
        [*scripted(turns, prefix=f"m{i}-")[:-1], f"member {i} done"]
        for i, turns in enumerate(members)
    ]
    restarted = drive_team(scripts, restart=True)
    assert restarted == drive_team(scripts, restart=False)
    assert restarted[0] == f"member {len(members) - 1} done"
    assert restarted[1] == [call for turns in members for turn in turns for call in turn]
