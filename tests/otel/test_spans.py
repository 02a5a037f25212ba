"""GenAI-convention spans of a ReAct agent with tools and of a team with parallel branches;
message content only on opt-in; no idempotency key in any attribute."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.otel._spans import children, events, named, one

from intermission import (
    END,
    HITL,
    GraphSpec,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    TeamAgent,
    ToolCall,
    tool,
)

RAN: list[str] = []


@tool
def lookup(city: str) -> str:
    """Weather of a city."""
    RAN.append(city)
    return f"sunny in {city}"


@tool
def book(city: str) -> str:
    """Book a trip."""
    RAN.append("book " + city)
    return f"booked {city}"


def weather_agent(name: str = "weather", hitl: bool = False) -> ReActAgent:
    script = [
        [ToolCall("lookup", {"city": "Oslo"}, "call_1"), ToolCall("book", {"city": "Oslo"},
                                                                  "call_2")],
        "It is sunny in Oslo; booked.",
    ]  # fmt: skip
    b = ReActAgent.of(ScriptedModel(script)).name(name).system_prompt("Be brief.")
    b = b.tools(lookup, book)
    if hitl:
        b = b.interceptor(HITLInterceptor().on_tool("book"))
    return b.build()


def test_react_with_tools_is_invoke_agent_chat_and_execute_tool(traced: Any) -> None:
    RAN.clear()
    s = InMemoryAgentSession.of("react-1")
    weather_agent().prompt("weather in Oslo, then book").session(s).call()
    spans = traced.spans()
    root = one(spans, "invoke_agent weather")
    assert root["parent"] is None and root["kind"] == "INTERNAL" and root["status"] == "UNSET"
    a = root["attributes"]
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "weather"
    assert a["gen_ai.conversation.id"] == "react-1"
    assert a["gen_ai.provider.name"] == "intermission.scripted"
    assert a["intermission.request.kind"] == "prompt"
    chats = named(spans, "chat scripted")
    assert len(chats) == 2 and all(c["parent"] == root["span"] for c in chats)
    assert chats[0]["attributes"]["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert chats[1]["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    assert chats[0]["attributes"]["gen_ai.operation.name"] == "chat"
    tools = [s for s in children(spans, root) if s["name"].startswith("execute_tool")]
    assert [t["name"] for t in tools] == ["execute_tool lookup", "execute_tool book"]
    for t, call in zip(tools, ("call_1", "call_2"), strict=True):
        ta = t["attributes"]
        assert ta["gen_ai.tool.call.id"] == call and ta["gen_ai.operation.name"] == "execute_tool"
        assert ta["intermission.effect.id"].startswith("effect-gen-")
        assert ta["intermission.tool.executed"] is True
    # one trace, in order: the model, the tools, the model again
    assert len({x["trace"] for x in spans}) == 1
    assert chats[0]["end"] <= tools[0]["start"] and tools[1]["end"] <= chats[1]["start"]
    # content is opt-in: none of it by default
    text = json.dumps(spans)
    assert "Oslo" not in text and "sunny" not in text and "Be brief" not in text
    assert RAN == ["Oslo", "book Oslo"]


@pytest.mark.otel(capture_content=True)
def test_content_only_on_opt_in(traced: Any) -> None:
    s = InMemoryAgentSession.of("react-2")
    weather_agent().prompt("weather in Oslo").session(s).call()
    spans = traced.spans()
    first = named(spans, "chat scripted")[0]["attributes"]
    inputs = json.loads(first["gen_ai.input.messages"])
    assert inputs[-1] == {"role": "user", "parts": [{"type": "text",
                                                     "content": "weather in Oslo"}]}  # fmt: skip
    assert json.loads(first["gen_ai.system_instructions"])[0]["content"] == "Be brief."
    out = json.loads(first["gen_ai.output.messages"])[0]
    assert out["finish_reason"] == "tool_call" and out["parts"][0]["name"] == "lookup"
    tool_span = one(spans, "execute_tool lookup")["attributes"]
    assert json.loads(tool_span["gen_ai.tool.call.arguments"]) == {"city": "Oslo"}
    assert tool_span["gen_ai.tool.call.result"] == "sunny in Oslo"


def test_a_tool_that_fails_is_an_error_span_that_ran(traced: Any) -> None:
    @tool
    def boom() -> str:
        """Fails."""
        raise RuntimeError("no")

    script = [[ToolCall("boom", {}, "c1"), ToolCall("nothere", {}, "c2")], "done"]
    agent = ReActAgent.of(ScriptedModel(script)).name("b").tools(boom).build()
    agent.prompt("go").session(InMemoryAgentSession.of("err")).call()
    spans = traced.spans()
    failed = one(spans, "execute_tool boom")
    assert failed["status"] == "ERROR" and failed["attributes"]["error.type"] == "error"
    assert failed["attributes"]["intermission.tool.executed"] is True
    missing = one(spans, "execute_tool nothere")
    assert missing["attributes"]["intermission.tool.executed"] is False
    assert missing["attributes"]["error.type"] == "not_found"
    assert one(spans, "invoke_agent b")["status"] == "UNSET"


def _parallel_team() -> TeamAgent:
    spec = GraphSpec("trip")
    spec.add_start().link_add("split")
    spec.add_parallel("split").link_add("weather").link_add("prices")
    spec.add_agent(weather_agent("weather")).link_add("join")
    spec.add_activity("prices").task(lambda ctx, node: ctx.put("price", 100)).link_add("join")
    spec.add_parallel("join").link_add(END)
    spec.add_end()
    return TeamAgent.of().name("trip").graph(spec).build()


def test_team_nodes_under_invoke_workflow_and_parallel_branches_are_siblings(traced: Any) -> None:
    s = InMemoryAgentSession.of("team-1")
    _parallel_team().prompt("plan a trip to Oslo").session(s).call()
    spans = traced.spans()
    root = one(spans, "invoke_workflow trip")
    assert root["parent"] is None
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_workflow"
    assert root["attributes"]["gen_ai.workflow.name"] == "trip"
    assert root["attributes"]["gen_ai.conversation.id"] == "team-1"
    nodes = children(spans, root)
    names = [n["name"] for n in nodes]
    assert {"node split", "node weather", "node prices", "node join"} <= set(names)
    assert all(n["attributes"]["intermission.node.completed"] is True for n in nodes
               if n["name"].startswith("node "))  # fmt: skip
    weather, prices = one(spans, "node weather"), one(spans, "node prices")
    assert weather["parent"] == prices["parent"] == root["span"]  # siblings
    member = one(spans, "invoke_agent weather")
    assert member["parent"] == weather["span"]
    assert member["attributes"]["gen_ai.conversation.id"] == "team-1"
    assert {c["name"] for c in children(spans, member)} == {
        "chat scripted", "execute_tool lookup", "execute_tool book",
    }  # fmt: skip
    assert len({x["trace"] for x in spans}) == 1


def test_a_team_member_pause_ends_spans_normally_and_records_the_pause(traced: Any) -> None:
    spec = GraphSpec("trip2")
    spec.add_start().link_add("weather")
    spec.add_agent(weather_agent("weather", hitl=True)).link_add(END)
    spec.add_end()
    team = TeamAgent.of().name("trip2").graph(spec).build()
    s = InMemoryAgentSession.of("team-2")
    team.prompt("plan").session(s).call()
    assert s.is_pending
    spans = traced.spans()
    root = one(spans, "invoke_workflow trip2")
    assert all(x["status"] == "UNSET" for x in spans)  # a pause is not an error
    (pause,) = events(root, "intermission.pause")
    assert pause["intermission.pause.id"].startswith("pause-")
    assert pause["intermission.pause.tools"] == ["book"]
    assert pause["intermission.pause.interrupts"] == ["call_2"]
    node = one(spans, "node weather")
    assert node["attributes"]["intermission.node.completed"] is False
    assert s.meta["otel"]["span"] == root["span"] and s.meta["otel"]["pause"] == pause[
        "intermission.pause.id"]  # fmt: skip
    # the approval is decided and the team resumes: a new trace linked to the paused one
    traced.clear()
    HITL.submit(s, HITL.pending_tasks(s)[0], HITLDecision.approve().reviewer("ann"))
    team.prompt().session(s).call()
    spans = traced.spans()
    again = one(spans, "invoke_workflow trip2")
    assert again["trace"] != root["trace"]
    assert again["links"] == [{"trace": root["trace"], "span": root["span"], "attributes": {
        "intermission.link.type": "resume", "intermission.pause.id": pause["intermission.pause.id"]
    }}]  # fmt: skip
    assert again["attributes"]["intermission.request.kind"] == "resume"
    member = one(spans, "invoke_agent weather")
    (decided,) = events(member, "intermission.decision.applied")
    assert decided["intermission.decision.verdict"] == "approve"
    assert decided["intermission.decision.principal"] == "ann"
    booked = one(spans, "execute_tool book")["attributes"]
    assert booked["intermission.tool.executed"] is True
    assert booked["intermission.decision.verdict"] == "approve"


def test_no_idempotency_key_or_hash_in_any_attribute(traced: Any) -> None:
    from intermission.decisions import fingerprint

    s = InMemoryAgentSession.of("keys")
    agent = weather_agent("k", hitl=True)
    agent.prompt("book").session(s).call()
    HITL.submit(s, HITL.pending_tasks(s)[0], HITLDecision.approve())
    agent.prompt().session(s).call()
    keys = list(s.ledger)
    assert keys and all(k.startswith("tool/book/") for k in keys)
    text = json.dumps(traced.spans())
    for key in keys:
        assert key not in text
        assert key.rsplit("/", 1)[1] not in text  # the arguments' fingerprint
    assert fingerprint({"city": "Oslo"}) not in text
    assert "tool/" not in text


def test_token_usage_when_the_model_reports_it(traced: Any) -> None:
    from tests._helpers import need_module

    need_module("pydantic_ai", "the pydantic-ai extra")
    from pydantic_ai.models.test import TestModel

    from intermission import PydanticAIModel

    model = PydanticAIModel(TestModel(custom_output_text="hello"))
    agent = ReActAgent.of(model).name("pai").build()
    s = InMemoryAgentSession.of("usage")
    assert agent.prompt("hi").session(s).call().content == "hello"
    (chat,) = [x for x in traced.spans() if x["name"].startswith("chat")]
    a = chat["attributes"]
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    assert a["gen_ai.operation.name"] == "chat" and chat["kind"] == "CLIENT"
    (end,) = [e for e in s.events if e.kind == "reason_end"]
    assert end.usage == {"input_tokens": a["gen_ai.usage.input_tokens"],
                         "output_tokens": a["gen_ai.usage.output_tokens"]}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
def test_token_usage_from_an_openai_compatible_server(traced: Any, stream: bool) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests._helpers import need_module

    need_module("httpx", "the openai extra")
    from intermission.agents.openai_compat import OpenAIChatModel

    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}

    class Server(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            message = {"role": "assistant", "content": "hi"}
            if stream:
                chunks = [{"choices": [{"index": 0, "delta": {"content": "hi"}}]},
                          {"choices": [], "usage": usage}]  # fmt: skip
                body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                kind = "text/event-stream"
            else:
                body = json.dumps({"choices": [{"index": 0, "message": message}], "usage": usage})
                kind = "application/json"
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        model = OpenAIChatModel("gpt-test", base_url=url, api_key="k", stream=stream)
        agent = ReActAgent.of(model).name("oa").build()
        agent.prompt("hi").session(InMemoryAgentSession.of("oa")).call()
    finally:
        server.shutdown()
        server.server_close()
    chat = one(traced.spans(), "chat gpt-test")
    a = chat["attributes"]
    assert a["gen_ai.provider.name"] == "openai" and a["gen_ai.request.model"] == "gpt-test"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 3)


def test_spans_a_tool_makes_nest_under_its_execute_tool_span(traced: Any) -> None:
    user = traced.provider.get_tracer("user-code")

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        with user.start_as_current_span("GET page"):
            return "page"

    script = [[ToolCall("fetch", {"url": "https://example.org"}, "c1")], "fetched"]
    agent = ReActAgent.of(ScriptedModel(script)).name("web").tools(fetch).build()
    agent.prompt("fetch it").session(InMemoryAgentSession.of("nest")).call()
    spans = traced.spans()
    assert one(spans, "GET page")["parent"] == one(spans, "execute_tool fetch")["span"]
    # and nothing of the request stays current once it returned
    from opentelemetry import trace

    assert not trace.get_current_span().get_span_context().is_valid


def test_a_graph_evaluated_on_its_own_pauses_and_continues_linked(traced: Any) -> None:
    from intermission import FlowEngine

    def gate(ctx: Any, node: Any) -> None:
        if ctx.get("decision") is None:
            ctx.session.pending(True, "needs approval")

    spec = GraphSpec("approve3")
    spec.add_start().link_add("a")
    spec.add_activity("a").task(lambda c, n: c.put("a", "done")).link_add("gate")
    spec.add_activity("gate").task(gate).link_add("c")
    spec.add_activity("c").task(lambda c, n: c.put("c", "done")).link_add(END)
    spec.add_end()
    s = InMemoryAgentSession.of("flow")
    FlowEngine().eval(spec, s.context)
    spans = traced.spans()
    root = one(spans, "invoke_workflow approve3")
    assert root["attributes"]["intermission.request.kind"] == "continue"
    assert root["attributes"]["gen_ai.provider.name"] == "intermission"
    (pause,) = events(root, "intermission.pause")
    assert pause["intermission.pause.reason"] == "needs approval"
    assert one(spans, "node gate")["attributes"]["intermission.node.completed"] is False
    traced.clear()
    s = InMemoryAgentSession.restore(s.to_json())
    s.context.put("decision", "APPROVE")
    assert FlowEngine().eval(spec, s.context).is_done
    spans = traced.spans()
    again = one(spans, "invoke_workflow approve3")
    assert again["links"][0]["span"] == root["span"]
    assert [x["name"] for x in children(spans, again)] == ["node gate", "node c", "node end"]


def test_two_copies_of_one_session_running_at_once_are_two_traces(traced: Any) -> None:
    # stale copies (two loads of one session, no claim) run side by side in one process:
    # each request is its own trace, never a member of the other's
    import threading

    both = threading.Barrier(2, timeout=60)

    @tool
    def meet(who: str) -> str:
        """Wait for the other copy."""
        both.wait()
        return who

    def run(who: str) -> None:
        script = [[ToolCall("meet", {"who": who}, f"call_{who}")], "met"]
        agent = ReActAgent.of(ScriptedModel(script)).name("twin").tools(meet).build()
        agent.prompt("go").session(InMemoryAgentSession.of("same")).call()

    threads = [threading.Thread(target=run, args=(who,)) for who in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    spans = traced.spans()
    roots = named(spans, "invoke_agent twin")
    assert len(roots) == 2 and all(r["parent"] is None for r in roots)
    assert roots[0]["trace"] != roots[1]["trace"]
    for root in roots:
        (tool_span,) = [s for s in children(spans, root) if s["name"] == "execute_tool meet"]
        assert tool_span["attributes"]["intermission.tool.executed"] is True
