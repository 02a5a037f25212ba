"""R42: every public entry point answers hostile input with an IntermissionError subclass
and changes nothing. Each entry point gets 500 hypothesis examples under CI=true (150
locally; IM_HOSTILE_EXAMPLES=N for more): wrong types, huge and negative numbers, NaN and
infinities, control characters, lone surrogates, NULs, bytes, objects, sets, JSON nested
thousands deep.

A call that is accepted must leave everything savable (``to_json()`` works); a refused one
must leave the session, graph or store exactly as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests._helpers import json_paths

from intermission import (
    END,
    HITL,
    ChatMessage,
    FakeClock,
    FlowContext,
    FlowEngine,
    GraphSpec,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    IntermissionError,
    PydanticAIModel,
    ReActAgent,
    Registry,
    ScriptedModel,
    SequentialIds,
    TeamAgent,
    ToolCall,
    check_deadline,
    decide_graph,
    tool,
)
from intermission.core.events_log import EventLog
from intermission.examples import build_change_graph, build_ops_agent
from intermission.hitl import approval_deadline, expire_approval
from intermission.limits import MAX_DEPTH
from intermission.stores import MemoryStore, SQLiteStore, decide_and_resume

EXAMPLES = int(os.environ.get("IM_HOSTILE_EXAMPLES", 0)) or (
    500 if os.environ.get("CI", "").lower() in ("1", "true", "yes") else 150
)
HOSTILE_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


ODD: list[Any] = [
    None, True, False, 0, -1, 1, 2**63, -(2**63) - 1, 10**400, 0.5, -0.0, float("nan"),
    float("inf"), float("-inf"), 1e308, "", " ", "\x00", "nul\x00inside", "\ud800",
    "a\udcffb", "\x1b[2K\r", "\u202e", "x" * 100_000, "approve", "APPROVE", "REJECT", "start",
    "end", b"bytes", bytearray(b"ba"), object(), print, type, Ellipsis, complex(1, 2),
    {1, 2}, frozenset(), (1, 2), [], {}, {1: "int key"}, {"a": object()}, [float("nan")],
    {"nested": {"deep": [1, {"x": float("inf")}]}}, lambda *a, **k: None, RuntimeError("x"),
]  # fmt: skip

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=10,
)  # fmt: skip

HOSTILE = st.one_of(
    st.sampled_from(ODD),
    JSONISH,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=30),
    st.binary(max_size=16),
    st.integers(min_value=90, max_value=250).map(_nest),
    st.integers(min_value=MAX_DEPTH - 1, max_value=MAX_DEPTH + 1).map(_nest),  # the limit
    st.lists(st.sampled_from(ODD), max_size=3),
    st.dictionaries(st.sampled_from(ODD).filter(lambda k: isinstance(k, (str, int))),
                    st.sampled_from(ODD), max_size=3),
)  # fmt: skip


# -- the world each call is made in ----------------------------------------------------------
OPS = build_ops_agent()
CHANGE = build_change_graph()


def ops_session() -> InMemoryAgentSession:
    s = InMemoryAgentSession.of("ops-1")
    OPS.prompt("delete user 1001").session(s).call()
    s.context.put("note", "a plain value")
    s.once("effect-a", lambda: "done")
    return s


def change_session() -> InMemoryAgentSession:
    s = InMemoryAgentSession.of("change-1")
    CHANGE.prompt("Upgrade").session(s).call()
    return s


OPS_JSON = ops_session().to_json()
CHANGE_JSON = change_session().to_json()


def spec() -> GraphSpec:
    g = GraphSpec("g")
    g.add_start().link_add("a")
    g.add_activity("a").task(lambda ctx, node: None).link_add(END)
    g.add_end()
    return g


GRAPH_DOC = {
    "id": "g", "title": "t",
    "layout": [
        {"id": "start", "type": "start", "link": [{"next_id": "a"}]},
        {"id": "a", "type": "activity", "task": "t", "link": "route"},
        {"id": "route", "type": "exclusive",
         "link": [{"next_id": "end", "when": "c", "priority": 2, "title": "yes"},
                  {"next_id": "end"}]},
        {"id": "end", "type": "end"},
    ],
}  # fmt: skip
REGISTRY = Registry()
REGISTRY.add("task", "t", lambda ctx, node: None)
REGISTRY.add("condition", "c", lambda ctx: True)


def _planted(doc: Any, data: st.DataObject) -> Any:
    """A copy of ``doc`` with one hostile value somewhere in it."""
    doc = json.loads(json.dumps(doc))
    path = data.draw(st.sampled_from(json_paths(doc)[1:]))
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = data.draw(HOSTILE)
    return doc


def _text(doc: Any) -> str | None:
    try:
        return json.dumps(doc)  # NaN and Infinity become tokens JSON does not have
    except (TypeError, ValueError, RecursionError):
        return None


# -- the checks ------------------------------------------------------------------------------
def _typed(fn: Callable[[], Any]) -> bool:
    """Run ``fn``: True if it was refused with a typed error, False if accepted; any other
    error fails the test."""
    try:
        fn()
    except IntermissionError:
        return True
    return False


SessionCall = Callable[[InMemoryAgentSession, Any], Any]
Make = Callable[[], InMemoryAgentSession]


def _session_case(make: Make, call: SessionCall) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        s = make()
        before = s.to_json()
        if _typed(lambda: call(s, value)):
            assert s.to_json() == before, "a refused call changed the session"
        else:  # an accepted value must still be savable, and what is saved loads (R50)
            InMemoryAgentSession.restore(s.to_json())

    return check


def _pure_case(call: Callable[[Any], Any]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        _typed(lambda: call(value))

    return check


def _spec_case(call: Callable[[GraphSpec, Any], Any]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        g = spec()
        before = json.dumps(_shape(g), sort_keys=True)
        if _typed(lambda: call(g, value)):
            assert json.dumps(_shape(g), sort_keys=True) == before

    return check


def _shape(g: GraphSpec) -> Any:
    return {nid: [n.kind, n.title_text, [(x.target, x.title, x.priority) for x in n.links],
                  dict(n.meta)] for nid, n in g.nodes.items()}  # fmt: skip


def _effect_result(value: Any) -> None:
    """The one call that may not change nothing: its effect ran. A result no store can
    keep is refused after the effect is recorded as completed (without the result)."""
    s = ops_session()
    ran: list[int] = []

    def effect() -> Any:
        ran.append(1)
        return value

    try:
        s.once("k2", effect)
    finally:
        assert ran == [1] and s.ledger["k2"].status == "completed"
        s.to_json()
        assert s.once("k2", effect) is not value or ran == [1]  # never run again


def _not_a_function(call: Callable[..., Any], key: str, value: Any) -> Any:
    # a function given as the effect runs and raises what it raises, like any effect;
    # what is checked here is everything that is not a function
    assume(not callable(value))
    return call(key, value)


def _no_argv(value: Any) -> Any:
    # a list of strings is a command that would really be started: what is checked here
    # is every other kind of value (a string, a number, a nested list, NULs…)
    assume(not (isinstance(value, list) and value and all(isinstance(x, str) for x in value)))
    return value


def _mcp(**kw: Any) -> Any:
    from intermission import mcp_tools

    tools = mcp_tools(**kw)
    tools.close()  # (port 9, discard, has no MCP server: never reached)
    return tools


def _task(s: InMemoryAgentSession) -> Any:
    (task,) = HITL.pending_tasks(s)
    return task


SESSION_CALLS: dict[str, Callable[[Any], None]] = {
    "InMemoryAgentSession(id)": _pure_case(lambda v: InMemoryAgentSession(v).to_json()),
    "InMemoryAgentSession(max_events)": _pure_case(
        lambda v: InMemoryAgentSession("s", max_events=v).to_json()),
    "InMemoryAgentSession(max_messages)": _pure_case(
        lambda v: InMemoryAgentSession("s", max_messages=v).to_json()),
    "InMemoryAgentSession(clock)": _pure_case(lambda v: InMemoryAgentSession("s", clock=v)),
    "InMemoryAgentSession(max_checkpoints)": _pure_case(
        lambda v: InMemoryAgentSession("s", max_checkpoints=v).to_json()),
    "session.fork(new_id)": _session_case(change_session, lambda s, v: s.fork(v).to_json()),
    "session.fork(at)": _session_case(change_session, lambda s, v: s.fork("f", v).to_json()),
    "session.fork(effects)": _session_case(
        change_session, lambda s, v: s.fork("f", effects=v).to_json()),
    "session.pending(True, reason)": _session_case(ops_session, lambda s, v: s.pending(True, v)),
    "session.pending(flag)": _session_case(ops_session, lambda s, v: s.pending(v, "why")),
    "context.put(key, value)": _session_case(ops_session, lambda s, v: s.context.put("k", v)),
    "context[key] = value": _session_case(ops_session, lambda s, v: s.context.__setitem__(v, 1)),
    "session.once(key)": _session_case(ops_session, lambda s, v: s.once(v, lambda: 1)),
    "session.once(result)": _pure_case(lambda v: _effect_result(v)),
    "session.once(fn)": _session_case(ops_session, lambda s, v: _not_a_function(s.once, "k3", v)),
    "session.resolve_effect": _session_case(ops_session, lambda s, v: s.resolve_effect("k", v)),
    "session.forget_effect": _session_case(ops_session, lambda s, v: s.forget_effect(v)),
    "session.add_message": _session_case(ops_session, lambda s, v: s.add_message(v)),
    "HITLDecision(verdict)": _pure_case(lambda v: HITLDecision(v)),
    "HITLDecision(comment)": _pure_case(lambda v: HITLDecision("approve", comment=v)),
    "HITLDecision(modified_args)": _pure_case(lambda v: HITLDecision("approve", modified_args=v)),
    "HITLDecision(reviewer)": _pure_case(lambda v: HITLDecision.approve().reviewer(v)),
    "HITLDecision.reject(reason)": _pure_case(lambda v: HITLDecision.reject(v)),
    "HITL.submit(task)": _session_case(
        ops_session, lambda s, v: HITL.submit(s, v, HITLDecision.approve())),
    "HITL.submit(decision)": _session_case(ops_session, lambda s, v: HITL.submit(s, _task(s), v)),
    "HITL.submit(edited args)": _session_case(ops_session, lambda s, v: HITL.submit(
        s, _task(s), HITLDecision.approve().modified_args({"user_id": v}))),
    "HITL.submit(session)": _pure_case(
        lambda v: HITL.submit(v, "c-1", HITLDecision.approve())),
    "HITL.submit_all": _session_case(ops_session, lambda s, v: HITL.submit_all(s, v)),
    "HITL.approve_all(reviewer)": _session_case(
        ops_session, lambda s, v: HITL.approve_all(s, reviewer=v)),
    "HITL.reject_all(reason)": _session_case(ops_session, lambda s, v: HITL.reject_all(s, v)),
    "HITL.get_pending_task_by_call_uuid": _session_case(
        ops_session, lambda s, v: HITL.get_pending_task_by_call_uuid(s, v)),
    "HITL.get_pending_task_by_tool_name": _session_case(
        ops_session, lambda s, v: HITL.get_pending_task_by_tool_name(s, v)),
    "HITL.get_decision": _session_case(ops_session, lambda s, v: HITL.get_decision(s, v)),
    "decide_graph(verdict)": _session_case(change_session, lambda s, v: decide_graph(s, v)),
    "decide_graph(reason)": _session_case(
        change_session, lambda s, v: decide_graph(s, "REJECT", reason=v)),
    "decide_graph(reviewer)": _session_case(
        change_session, lambda s, v: decide_graph(s, "APPROVE", reviewer=v)),
    "decide_graph(comment)": _session_case(
        change_session, lambda s, v: decide_graph(s, "APPROVE", comment=v)),
    "decide_graph(keys)": _session_case(
        change_session, lambda s, v: decide_graph(s, "APPROVE", keys=v)),
    "decide_graph(approvers)": _session_case(
        change_session, lambda s, v: decide_graph(s, "APPROVE", reviewer="a", approvers=v)),
    "check_deadline(session)": _pure_case(lambda v: check_deadline(v)),
    "check_deadline(call_uuid)": _session_case(ops_session, lambda s, v: check_deadline(s, v)),
    "check_deadline(now_ms)": _session_case(ops_session, lambda s, v: check_deadline(s, now_ms=v)),
    "check_deadline(keys)": _session_case(change_session, lambda s, v: check_deadline(s, keys=v)),
    "expire_approval(now_ms)": _session_case(
        change_session, lambda s, v: expire_approval(s, now_ms=v)),
    "expire_approval(keys)": _session_case(change_session, lambda s, v: expire_approval(s, v)),
    "approval_deadline(session)": _pure_case(lambda v: approval_deadline(v)),
    "decide_and_resume(store)": _pure_case(lambda v: decide_and_resume(v, "x", print, OPS)),
    "decide_and_resume(session_id)": _pure_case(
        lambda v: decide_and_resume(MemoryStore(), v, print, OPS)),
    "decide_and_resume(decide)": _pure_case(
        lambda v: decide_and_resume(MemoryStore(), "x", v, OPS)),
    "decide_and_resume(agent)": _pure_case(
        lambda v: decide_and_resume(MemoryStore(), "x", print, v)),
    "decide_and_resume(wait_s)": _pure_case(
        lambda v: decide_and_resume(MemoryStore(), "x", print, OPS, wait_s=v)),
}  # fmt: skip

LOADER_CALLS: dict[str, Callable[[Any], None]] = {
    "restore(any value)": _pure_case(lambda v: InMemoryAgentSession.restore(v).to_json()),
    "GraphSpec.from_json(any value)": _pure_case(lambda v: GraphSpec.from_json(v)),
    "GraphSpec.from_yaml(any value)": _pure_case(lambda v: GraphSpec.from_yaml(v)),
    "GraphSpec.from_dict(any value)": _pure_case(lambda v: GraphSpec.from_dict(v, REGISTRY)),
}

BUILDER_CALLS: dict[str, Callable[[Any], None]] = {
    "GraphSpec(id)": _pure_case(lambda v: GraphSpec(v)),
    "GraphSpec(title)": _pure_case(lambda v: GraphSpec("g", v)),
    "spec.add_activity(id)": _spec_case(lambda g, v: g.add_activity(v)),
    "node.link_add(target)": _spec_case(lambda g, v: g.get_node("a").link_add(v)),
    "node.link_add(when)": _spec_case(lambda g, v: g.get_node("a").link_add("end", v)),
    "node.link_add(title)": _spec_case(lambda g, v: g.get_node("a").link_add("end", None, v)),
    "node.link_add(priority)": _spec_case(
        lambda g, v: g.get_node("a").link_add("end", None, None, v)),
    "node.title": _spec_case(lambda g, v: g.get_node("a").title(v)),
    "node.task": _spec_case(lambda g, v: g.get_node("a").task(v)),
    "node.meta_put": _spec_case(lambda g, v: g.get_node("a").meta_put("k", v)),
    "spec.add_loop": _spec_case(lambda g, v: g.add_loop("l", v)),
    "spec.add_agent": _spec_case(lambda g, v: g.add_agent(v)),
    "spec.add_subgraph": _spec_case(lambda g, v: g.add_subgraph("sub", v)),
    "Registry.add(kind)": _pure_case(lambda v: Registry().add(v, "n", print)),
    "Registry.add(name)": _pure_case(lambda v: Registry().add("task", v, print)),
    "Registry.add(obj)": _pure_case(lambda v: Registry().add("task", "n", v)),
    "ReActAgent.of": _pure_case(lambda v: ReActAgent.of(v)),
    "builder.name": _pure_case(lambda v: ReActAgent.of(ScriptedModel(["x"])).name(v).build()),
    "builder.max_turns": _pure_case(lambda v: ReActAgent.of(ScriptedModel(["x"])).max_turns(v)),
    "builder.session_window": _pure_case(
        lambda v: ReActAgent.of(ScriptedModel(["x"])).session_window(v)),
    "builder.tools": _pure_case(lambda v: ReActAgent.of(ScriptedModel(["x"])).tools(v)),
    "builder.system_prompt": _pure_case(
        lambda v: ReActAgent.of(ScriptedModel(["x"])).system_prompt(v)),
    "builder.output_key": _pure_case(lambda v: ReActAgent.of(ScriptedModel(["x"])).output_key(v)),
    "builder.clock": _pure_case(lambda v: ReActAgent.of(ScriptedModel(["x"])).clock(v)),
    "builder.ids": _pure_case(lambda v: ReActAgent.of(ScriptedModel(["x"])).ids(v)),
    "agent.prompt(text)": _pure_case(
        lambda v: OPS.prompt(v).session(InMemoryAgentSession.of("p")).call()),
    "request.session(session)": _pure_case(lambda v: OPS.prompt("x").session(v).call()),
    "TeamAgent.of": _pure_case(lambda v: TeamAgent.of(v)),
    "team.graph": _pure_case(lambda v: TeamAgent.of().graph(v)),
    "team.interceptor": _pure_case(lambda v: TeamAgent.of().interceptor(v)),
    "team.step(steps)": _session_case(change_session, lambda s, v: CHANGE.step(s, v)),
    "ScriptedModel(script)": _pure_case(lambda v: ScriptedModel(v)),
    "ScriptedModel(chunk_size)": _pure_case(lambda v: ScriptedModel(["x"], chunk_size=v)),
    "ScriptedModel(chunk_delay)": _pure_case(lambda v: ScriptedModel(["x"], chunk_delay=v)),
    "ScriptedModel(keep_calls)": _pure_case(lambda v: ScriptedModel(["x"], keep_calls=v)),
    "ToolCall(name)": _pure_case(lambda v: ToolCall(v)),
    "ToolCall(args)": _pure_case(lambda v: ToolCall("x", v)),
    "ToolCall(id)": _pure_case(lambda v: ToolCall("x", {}, v)),
    "ChatMessage(role)": _pure_case(lambda v: ChatMessage(role=v)),
    "ChatMessage(content)": _pure_case(lambda v: ChatMessage(role="user", content=v)),
    "tool(fn)": _pure_case(lambda v: tool(v)),
    "tool(name)": _pure_case(lambda v: tool(name=v)(print)),
    "tool(destructive)": _pure_case(lambda v: tool(destructive=v)(print)),
    "HITLInterceptor.on_destructive(policy)": _pure_case(
        lambda v: HITLInterceptor().on_destructive(v)),
    "HITLInterceptor.on_destructive(deadline)": _pure_case(
        lambda v: HITLInterceptor().on_destructive(deadline_ms=v)),
    "PydanticAIModel(model)": _pure_case(lambda v: PydanticAIModel(v)),
    "PydanticAIModel(settings)": _pure_case(lambda v: PydanticAIModel("test", settings=v)),
    "mcp_tools(command)": _pure_case(lambda v: _mcp(command=_no_argv(v))),
    "mcp_tools(url)": _pure_case(lambda v: _mcp(url=v, timeout_s=2)),
    "mcp_tools(timeout_s)": _pure_case(lambda v: _mcp(url="http://127.0.0.1:9/mcp", timeout_s=v)),
    "mcp_tools(prefix)": _pure_case(lambda v: _mcp(url="http://127.0.0.1:9/mcp", prefix=v,
                                                   timeout_s=2)),
    "HITLInterceptor(on_expire)": _pure_case(lambda v: HITLInterceptor(v)),
    "HITLInterceptor.on_tool(name)": _pure_case(lambda v: HITLInterceptor().on_tool(v)),
    "HITLInterceptor.on_tool(policy)": _pure_case(lambda v: HITLInterceptor().on_tool("t", v)),
    "HITLInterceptor.on_tool(deadline)": _pure_case(
        lambda v: HITLInterceptor().on_tool("t", deadline_ms=v)),
    "HITLInterceptor.approvers": _pure_case(lambda v: HITLInterceptor().on_tool("t").approvers(v)),
    "FlowEngine(interceptors)": _pure_case(lambda v: FlowEngine(v)),
    "FlowEngine(clock)": _pure_case(lambda v: FlowEngine(clock=v)),
    "FlowEngine.eval(graph)": _pure_case(lambda v: FlowEngine().eval(v, FlowContext.of("c"))),
    "FlowEngine.eval(ctx)": _pure_case(lambda v: FlowEngine().eval(spec(), v)),
    "FlowEngine.eval(steps)": _pure_case(lambda v: FlowEngine().eval(spec(), FlowContext(), v)),
    "FlowContext(id)": _pure_case(lambda v: FlowContext(v)),
    "FlowContext(data)": _pure_case(lambda v: FlowContext("c", v)),
    "FakeClock(start)": _pure_case(lambda v: FakeClock(v)),
    "FakeClock(step)": _pure_case(lambda v: FakeClock(0, v)),
    "FakeClock.advance": _pure_case(lambda v: FakeClock().advance(v)),
    "SequentialIds(prefix)": _pure_case(lambda v: SequentialIds(v)),
    "EventLog(max_events)": _pure_case(lambda v: EventLog(v)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SESSION_CALLS))
def test_session_and_decision_entry_points(name: str) -> None:
    HOSTILE_SETTINGS(given(value=HOSTILE)(SESSION_CALLS[name]))()


@pytest.mark.parametrize("name", sorted(BUILDER_CALLS))
def test_constructor_and_builder_entry_points(name: str) -> None:
    HOSTILE_SETTINGS(given(value=HOSTILE)(BUILDER_CALLS[name]))()


@pytest.mark.parametrize("name", sorted(LOADER_CALLS))
def test_loaders_given_any_value(name: str) -> None:
    HOSTILE_SETTINGS(given(value=HOSTILE)(LOADER_CALLS[name]))()


@pytest.mark.parametrize("base", ["ops", "change"])
@pytest.mark.parametrize("form", ["json", "dict"])
def test_snapshot_loaders_given_a_snapshot_with_a_hostile_value_planted(
    base: str, form: str
) -> None:
    doc = json.loads(OPS_JSON if base == "ops" else CHANGE_JSON)

    @HOSTILE_SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        planted = _planted(doc, data)
        value = _text(planted) if form == "json" else planted
        if value is None:
            return
        try:
            s = InMemoryAgentSession.restore(value)
        except IntermissionError:
            return
        s.to_json()  # accepted: it is consistent and savable
        agent = OPS if base == "ops" else CHANGE
        try:  # and resuming it gives typed errors only
            if HITL.pending_tasks(s):
                HITL.approve_all(s)
            agent.prompt().session(s).call()
        except IntermissionError:
            pass

    check()


@pytest.mark.parametrize("form", ["json", "yaml", "dict"])
def test_graph_loaders_given_a_graph_with_a_hostile_value_planted(form: str) -> None:
    import yaml

    @HOSTILE_SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        planted = _planted(GRAPH_DOC, data)
        try:
            if form == "json":
                text = _text(planted)
                if text is None:
                    return
                GraphSpec.from_json(text, REGISTRY)
            elif form == "yaml":
                try:
                    text = yaml.safe_dump(planted)
                except (yaml.YAMLError, RecursionError):
                    return
                GraphSpec.from_yaml(text, REGISTRY)
            else:
                GraphSpec.from_dict(planted, REGISTRY)
        except IntermissionError:
            pass

    check()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    made: Any = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "h.db")
    made.save(ops_session())
    yield made
    made.close()


STORE_CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "save": lambda st_, v: st_.save(v),
    "load": lambda st_, v: st_.load(v),
    "delete": lambda st_, v: st_.delete(v),
    "pending(limit)": lambda st_, v: st_.pending(limit=v),
    "pending(agent)": lambda st_, v: st_.pending(agent=v),
    "pending(before)": lambda st_, v: st_.pending(before=v),
    "resume": lambda st_, v: st_.resume(v).__enter__(),
    "claim": lambda st_, v: st_.claim(v).__enter__(),
    "put_snapshot": lambda st_, v: st_.put_snapshot(v, version=1),
    "put_snapshot(version)": lambda st_, v: st_.put_snapshot(OPS_JSON, version=v),
    "MemoryStore(lease_ms)": lambda st_, v: MemoryStore(lease_ms=v),
}


@pytest.mark.parametrize("name", sorted(STORE_CALLS))
def test_store_entry_points(name: str, store: Any) -> None:
    call = STORE_CALLS[name]

    @HOSTILE_SETTINGS
    @given(value=HOSTILE)
    def check(value: Any) -> None:
        before = (store.count(), store.raw_row("ops-1"))
        if _typed(lambda: call(store, value)):
            assert (store.count(), store.raw_row("ops-1")) == before

    check()
