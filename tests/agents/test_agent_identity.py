"""Issue 27, case 9: a session keeps its agent. A session records the name and the
fingerprint of the agent that made it (its tools and their argument schemas, its approval
policy; a team's graph and members); resuming or prompting it with another agent — the
bundled example under the same name, a changed tool set or policy — raises
AgentMismatchError and changes nothing, unless the caller adopts the session. Before, any
agent of the same name (or none) resumed it: the user's tool never ran, the example's did.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from intermission import (
    END,
    HITL,
    AgentMismatchError,
    GraphSpec,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    IntermissionError,
    ReActAgent,
    ReActInterceptor,
    ScriptedModel,
    SessionStateError,
    TeamAgent,
    ToolCall,
    tool,
)
from intermission.examples import build_change_graph, build_ops_agent, change_approval_task
from intermission.stores import decide_and_resume

DELETED: list[int] = []


@tool
def delete_user(user_id: int) -> str:
    """Delete a user account (the user's own tool: it records what really ran)."""
    DELETED.append(user_id)
    return f"user {user_id} deleted"


def _script(messages: list[Any], tools: Any) -> Any:
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    seen = [m.content for m in messages[last_user:] if m.role == "tool"]
    return f"Done: {seen[-1]}." if seen else [ToolCall("delete_user", {"user_id": 1001})]


def ops(*tools: Any, hitl: Any = None, model: Any = None, **builder: Any) -> Any:
    """The user's own ``ops`` agent (same name, tool and policy shape as the example)."""
    b = ReActAgent.of(model or ScriptedModel(_script)).name(builder.pop("name", "ops"))
    b = b.tools(*(tools or (delete_user,)))
    b = b.interceptor(hitl if hitl is not None else HITLInterceptor().on_tool("delete_user"))
    for key, value in builder.items():
        b = getattr(b, key)(*value) if isinstance(value, tuple) else getattr(b, key)(value)
    return b.build()


def paused(agent: Any | None = None) -> tuple[Any, InMemoryAgentSession]:
    DELETED.clear()
    agent = agent or ops()
    s = InMemoryAgentSession.of("s-1")
    agent.prompt("delete user 1001").session(s).call()
    assert s.is_pending
    return agent, s


def test_the_bundled_example_does_not_resume_a_users_session() -> None:
    mine, s = paused()
    HITL.approve_all(s, reviewer="alice")
    before = s.to_json()
    example = build_ops_agent()  # same name, same tool name, same schema, same policy shape
    assert example.name == mine.name == s.agent and example.fingerprint != mine.fingerprint
    with pytest.raises(AgentMismatchError) as caught:
        example.prompt().session(s).call()
    err = caught.value
    assert isinstance(err, SessionStateError) and isinstance(err, IntermissionError)
    assert (err.session_id, err.recorded, err.agent) == ("s-1", "ops", "ops")
    assert (err.recorded_fingerprint, err.fingerprint) == (mine.fingerprint, example.fingerprint)
    text = str(err)
    assert mine.fingerprint in text and example.fingerprint in text and ".adopt()" in text
    assert s.to_json() == before and DELETED == []  # nothing changed, nothing ran
    # streams and new prompts are refused alike, before any event
    with pytest.raises(AgentMismatchError):
        list(example.prompt().session(s).stream())
    with pytest.raises(AgentMismatchError):
        example.prompt("something else").session(s).call()
    assert s.to_json() == before
    # the session's own agent (a new instance, as another process builds it) resumes it
    assert ops().prompt().session(s).call().content == "Done: user 1001 deleted."
    assert DELETED == [1001] and s.status == "done"


def test_another_name_is_refused_and_a_new_session_records_its_agent() -> None:
    mine, s = paused()
    assert (s.agent, s.agent_fingerprint) == ("ops", mine.fingerprint)
    other = ops(name="ops2")
    assert other.fingerprint == mine.fingerprint  # the name is recorded beside it
    with pytest.raises(AgentMismatchError, match="another name"):
        other.prompt().session(s).call()
    snap = json.loads(s.to_json())
    assert snap["agent"] == "ops" and snap["agent_fingerprint"] == mine.fingerprint


@tool
def delete_user_v2(user_id: int, hard: bool = False) -> str:
    """Delete a user account."""
    return f"user {user_id} deleted"


@tool(name="delete_user")
def delete_user_str(user_id: str) -> str:
    """Delete a user account (by name)."""
    return f"user {user_id} deleted"


@tool(name="delete_user")
def delete_user_hard(user_id: int, hard: bool = False) -> str:
    """Delete a user account."""
    return f"user {user_id} deleted"


@tool(name="delete_user", destructive=True)
def delete_user_destructive(user_id: int) -> str:
    """Delete a user account."""
    return f"user {user_id} deleted"


@tool
def audit(entry: str) -> str:
    """Write to the audit log."""
    return "ok"


def _only_lead(reviewer: str | None, task: Any) -> bool:
    return reviewer == "lead"


def _ask_when_big(trace: Any, args: dict[str, Any]) -> str | None:
    return "big" if args.get("user_id", 0) > 10 else None


CHANGED = {
    "a tool added": lambda: ops(delete_user, audit),
    "another function under the tool's name": lambda: ops(delete_user_hard),
    "an argument's type": lambda: ops(delete_user_str),
    "marked destructive": lambda: ops(delete_user_destructive),
    "asks no more": lambda: ops(hitl=HITLInterceptor()),
    "a deadline": lambda: ops(hitl=HITLInterceptor().on_tool("delete_user", deadline_ms=60_000)),
    "on_expire": lambda: ops(
        hitl=HITLInterceptor(on_expire="wait").on_tool("delete_user", deadline_ms=60_000)
    ),
    "approvers": lambda: ops(hitl=HITLInterceptor().on_tool("delete_user").approvers({"lead"})),
    "a callable approver policy": lambda: ops(
        hitl=HITLInterceptor().on_tool("delete_user").approvers(_only_lead)
    ),
    "a policy function": lambda: ops(hitl=HITLInterceptor().on_tool("delete_user", _ask_when_big)),
    "on_destructive": lambda: ops(hitl=HITLInterceptor().on_tool("delete_user").on_destructive()),
}


@pytest.mark.parametrize("change", list(CHANGED))
def test_a_changed_tool_set_or_policy_is_another_agent(change: str) -> None:
    mine, s = paused()
    before = s.to_json()
    changed = CHANGED[change]()
    assert changed.fingerprint != mine.fingerprint
    with pytest.raises(AgentMismatchError, match="other tools or policy"):
        changed.prompt().session(s).call()
    assert s.to_json() == before


class Timer(ReActInterceptor):
    """Watches only (no policy_data): not part of the fingerprint."""

    def on_reason_end(self, trace: Any, message: Any, duration_ms: float) -> None:
        pass


@tool(name="delete_user", description="Remove an account for good.")
def delete_user_redocumented(
    user_id: Annotated[int, Field(description="the account's numeric id")],
) -> str:
    """Another docstring."""
    DELETED.append(user_id)
    return f"user {user_id} deleted"


# (the same function as delete_user for the fingerprint: same module, same qualified
# name — a redeployed, reworded tool)
delete_user_redocumented.fn.__qualname__ = delete_user.fn.__qualname__


UNCHANGED = {
    "another model": lambda: ops(model=ScriptedModel(_script, chunk_size=2)),
    "a system prompt": lambda: ops(system_prompt="You are careful."),
    "max_turns": lambda: ops(max_turns=3),
    "session_window": lambda: ops(session_window=0),
    "retry settings": lambda: ops(retry_config=(5, 10)),
    "a watching interceptor": lambda: ops(interceptor=Timer()),
    "docstrings and descriptions": lambda: ops(delete_user_redocumented),
}


@pytest.mark.parametrize("change", list(UNCHANGED))
def test_what_does_not_decide_effects_keeps_the_fingerprint(change: str) -> None:
    mine, s = paused()
    HITL.approve_all(s, reviewer="alice")
    same = UNCHANGED[change]()
    assert same.fingerprint == mine.fingerprint
    assert same.prompt().session(s).call().content == "Done: user 1001 deleted."
    assert DELETED == [1001]


def test_adopt_hands_the_session_over_on_purpose() -> None:
    mine, s = paused()
    changed = ops(delete_user, audit)
    response = changed.prompt().session(s).adopt().call()
    assert response.is_pending  # (the same undecided task re-suspends)
    assert (s.agent, s.agent_fingerprint) == ("ops", changed.fingerprint)
    with pytest.raises(AgentMismatchError):  # now the old agent is the stranger
        mine.prompt().session(s).call()
    HITL.approve_all(s, reviewer="alice", agent=changed)
    assert changed.prompt().session(s).call().content == "Done: user 1001 deleted."
    renamed = ops(name="ops-v2")
    renamed.prompt("delete user 1001").session(s).adopt().call()
    assert s.agent == "ops-v2"


def test_a_snapshot_from_before_fingerprints_is_taken_by_the_first_agent_to_run_it() -> None:
    mine, s = paused()
    data = json.loads(s.to_json())
    del data["agent_fingerprint"]  # as written before this field (and versions, R62)
    del data["agent_version"], data["release"]
    old = InMemoryAgentSession.restore(json.dumps(data))
    assert old.agent == "ops" and old.agent_fingerprint is None
    with pytest.raises(AgentMismatchError):  # the name was recorded: it still counts
        ops(name="other").prompt().session(old).call()
    HITL.approve_all(old, reviewer="alice")
    changed = ops(delete_user, audit)  # the first agent of that name to run it records itself
    assert changed.prompt().session(old).call().content == "Done: user 1001 deleted."
    assert old.agent_fingerprint == changed.fingerprint
    with pytest.raises(AgentMismatchError):
        mine.prompt("again").session(old).call()


def test_a_fingerprint_is_computed_once_per_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = ops()
    calls = []
    real = type(agent)._fingerprint_data

    def counted(self: Any) -> Any:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(type(agent), "_fingerprint_data", counted)
    for i in range(5):
        s = InMemoryAgentSession.of(f"s-{i}")
        agent.prompt("go").session(s).call()
        HITL.approve_all(s)
        agent.prompt().session(s).call()
    assert len(calls) == 1


def test_a_team_keeps_its_graph_and_members() -> None:
    s = InMemoryAgentSession.of("c-1")
    example = build_change_graph()
    example.prompt("upgrade").session(s).call()
    assert s.is_pending and s.agent_fingerprint == example.fingerprint
    assert build_change_graph(lambda change_id: "mine").fingerprint == example.fingerprint
    before = s.to_json()

    # the user's own "change" graph: the same shape and steps, its own executor tool
    @tool
    def apply_change(change_id: str) -> str:
        """Apply the change (the user's code)."""
        return f"applied {change_id}"

    proposal = ReActAgent.of(ScriptedModel(["plan"] * 5)).name("proposal_agent")
    executor = ReActAgent.of(ScriptedModel(["ok"] * 5)).name("executor_agent")
    spec = GraphSpec("change")
    spec.add_start().link_add("proposal_agent")
    spec.add_agent(proposal.output_key("change.proposal").build()).link_add("approval")
    spec.add_activity("approval").task(change_approval_task).link_add("approval_route")
    spec.add_exclusive("approval_route").link_add(
        "executor_agent", when=lambda ctx: ctx.get("approval.decision") == "APPROVE"
    ).link_add("reject_finish")
    spec.add_agent(executor.tools(apply_change).build()).link_add(END)
    spec.add_activity("reject_finish").task(change_approval_task).link_add(END)
    spec.add_end()
    users = TeamAgent.of().name("change").graph(spec).build()
    assert users.fingerprint != example.fingerprint
    with pytest.raises(AgentMismatchError):
        users.prompt().session(s).call()
    assert s.to_json() == before
    with_deadline = build_change_graph(deadline_ms=60_000)  # another approval step
    with pytest.raises(AgentMismatchError):
        with_deadline.prompt().session(s).call()
    assert s.to_json() == before


def test_a_team_member_s_tool_set_is_part_of_the_team_s_fingerprint() -> None:
    first = TeamAgent.sequential("desk", [ops()])
    again = TeamAgent.sequential("desk", [ops()])
    changed = TeamAgent.sequential("desk", [ops(delete_user, audit)])
    assert first.fingerprint == again.fingerprint != changed.fingerprint
    s = InMemoryAgentSession.of("t-1")
    first.prompt("delete user 1001").session(s).call()
    assert s.is_pending and s.agent == "desk"
    with pytest.raises(AgentMismatchError):
        changed.prompt().session(s).call()


def test_decide_and_resume_refuses_another_agent_before_claiming(make_store: Any) -> None:
    store = make_store()
    _, s = paused()
    store.save(s)
    row = store.raw_row("s-1")

    def approve(session: Any) -> None:
        HITL.approve_all(session, reviewer="alice")

    with pytest.raises(AgentMismatchError):
        decide_and_resume(store, "s-1", approve, build_ops_agent())
    assert store.raw_row("s-1") == row and DELETED == []
    # a decision checked against an agent of the session's name but not its fingerprint
    # is refused as well (its policy never judges this session)
    loaded = store.load("s-1")
    before = loaded.to_json()
    with pytest.raises(AgentMismatchError):
        HITL.submit(loaded, HITL.pending_tasks(loaded)[0], HITLDecision.approve(),
                    agent=build_ops_agent())  # fmt: skip
    assert loaded.to_json() == before
    # adopting on purpose: the new agent's tools run
    outcome = decide_and_resume(store, "s-1", approve, ops(delete_user, audit), adopt=True)
    assert outcome.response.content == "Done: user 1001 deleted." and DELETED == [1001]
    assert store.load("s-1").agent_fingerprint == ops(delete_user, audit).fingerprint


# -- the fingerprint, for any tool set -------------------------------------------------
TYPES = st.sampled_from(["int", "str", "float", "bool", "list[int]", "int | None"])
TOOLSETS = st.dictionaries(
    st.sampled_from(["alpha", "beta", "gamma"]),
    st.dictionaries(st.sampled_from(["x", "y", "z"]), TYPES, max_size=3),
    min_size=1,
    max_size=3,
)


def _make_tool(name: str, params: dict[str, str], doc: str) -> Any:
    args = ", ".join(f"{p}: {t}" for p, t in params.items())
    scope: dict[str, Any] = {}
    exec(f"def {name}({args}) -> str:\n    {doc!r}\n    return 'ok'\n", scope)
    fn = scope[name]
    fn.__module__ = __name__
    return tool(fn)


def _agent(tools: dict[str, dict[str, str]], asks: frozenset[str], doc: str = "d") -> Any:
    hitl = HITLInterceptor()
    for name in sorted(asks):
        hitl = hitl.on_tool(name)
    made = [_make_tool(n, p, doc) for n, p in tools.items()]
    return ReActAgent.of(ScriptedModel(["x"])).name("a").tools(*made).interceptor(hitl).build()


@settings(max_examples=40, deadline=None)
@given(tools=TOOLSETS, other=TOOLSETS, asks=st.frozensets(st.sampled_from(["alpha", "beta"])))
def test_the_fingerprint_differs_exactly_when_tools_or_policy_differ(
    tools: dict[str, dict[str, str]], other: dict[str, dict[str, str]], asks: frozenset[str]
) -> None:
    a = _agent(tools, asks)
    assert _agent(tools, asks, doc="reworded").fingerprint == a.fingerprint
    assert (_agent(other, asks).fingerprint == a.fingerprint) == (
        {n: sorted(p.items()) for n, p in other.items()}
        == {n: sorted(p.items()) for n, p in tools.items()}
    )
    flipped = asks ^ {"alpha"}
    assert _agent(tools, flipped).fingerprint != a.fingerprint
