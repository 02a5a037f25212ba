"""Issue 20, cases 4, 5 and 7: a tool call's ledger identity is minted by intermission
when the call is proposed, and for an approved call includes the fingerprint of the
arguments that run; provider call ids are metadata, made unique when they repeat, and
never make a session unloadable (R48). On memory, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._helpers import fresh_pg, need_module, pg_dsn

from intermission import (
    HITL,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    Tool,
    ToolCall,
    mcp_tools,
    tool,
)
from intermission.stores import MemoryStore, SQLiteStore

OPS_SERVER = Path(__file__).resolve().parents[1] / "mcp_ops_server.py"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_and_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """A fresh store and the URL the CLI opens it by (None for memory)."""
    if request.param == "memory":
        store: Any = MemoryStore()
        url = None
    elif request.param == "sqlite":
        url = str(tmp_path / "s.sqlite")
        store = SQLiteStore(url)
    else:
        store, url = fresh_pg(), pg_dsn()
    yield store, url
    store.close()


def ops_tools(counts: Path) -> Any:
    need_module("mcp", "the mcp extra (pip install intermission[mcp])")
    return mcp_tools(
        command=[sys.executable, str(OPS_SERVER)], env={"MCP_COUNT_FILE": str(counts)}
    )


def server_calls(counts: Path, tool_name: str) -> int:
    if not counts.exists():
        return 0
    rows = [json.loads(line) for line in counts.read_text().splitlines() if line.strip()]
    return sum(1 for r in rows if r["tool"] == tool_name)


def observations(s: Any) -> list[str]:
    return [e.observation for e in s.events if e.kind == "tool_call_end"]


# -- case 4: a model that numbers its calls per reply (call_0) ------------------------------
def per_reply_numbering(messages: list[Any], info: Any) -> Any:
    """A FunctionModel that names the target of the last prompt and numbers the calls of
    each reply from 0, as test models and some providers do; once the tool answered, it
    repeats what the tool said."""
    from pydantic_ai.messages import (
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    parts = [p for m in messages for p in m.parts]
    last = max(i for i, p in enumerate(parts) if isinstance(p, UserPromptPart))
    answered = [p for p in parts[last:] if isinstance(p, ToolReturnPart)]
    if answered:
        return ModelResponse(parts=[TextPart(f"said: {answered[-1].content}")])
    target = str(parts[last].content).split()[-1]
    call = ToolCallPart("rename_user", {"user_id": 7, "name": target}, tool_call_id="call_0")
    return ModelResponse(parts=[call])


def test_a_call_id_reused_on_a_later_request_never_gets_the_earlier_result(
    store_and_url: tuple[Any, Any], tmp_path: Path
) -> None:
    """Case 4: approve ``rename(prod-A)`` (``call_0``), then on the next request approve
    ``rename(prod-B)`` (``call_0`` again): prod-B is sent and answered, not prod-A's
    result given again. The provider's id still keys the HITL lookup."""
    need_module("pydantic_ai", "the pydantic-ai extra")
    from pydantic_ai.models.function import FunctionModel

    from intermission import PydanticAIModel

    store, _ = store_and_url
    counts = tmp_path / "calls.jsonl"
    with ops_tools(counts) as tools:
        model = PydanticAIModel(FunctionModel(per_reply_numbering), stream=False)
        agent = (
            ReActAgent.of(model).tools(*tools).interceptor(HITLInterceptor().on_destructive())
        ).build()
        s = InMemoryAgentSession.of("p4")
        for n, target in enumerate(["prod-A", "prod-B"], 1):
            agent.prompt(f"rename user 7 to {target}").session(s).call()
            assert s.is_pending
            store.save(s)
            s = store.load("p4")
            task = HITL.get_pending_task_by_call_uuid(s, "call_0")
            assert task is not None and task.args["name"] == target
            HITL.submit(s, task, HITLDecision.approve())
            answer = agent.prompt().session(s).call().content
            assert answer == f"said: user 7 renamed to {target}"
            assert server_calls(counts, "rename_user") == n
            store.save(s)
            s = store.load("p4")
        assert observations(s)[-1] == "user 7 renamed to prod-B"
        assert len(s.ledger) == 2  # two effects, each once


# -- case 5: two calls with one id in a reply ------------------------------------------------
MOVED: list[tuple[str, int]] = []


@tool(destructive=True)
def pay(account: str, amount: int) -> str:
    """Pay an account."""
    MOVED.append((account, amount))
    return f"paid {amount} to {account}"


class OneIdTwice(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose reply holds two tool calls with one id."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tool_ids = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        if tool_ids:
            message: dict[str, Any] = {"role": "assistant", "content": f"results: {tool_ids}"}
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_dup", "type": "function", "function": {
                    "name": "pay", "arguments": json.dumps({"account": a, "amount": 5})}}
                for a in ("alice", "bob")
            ]}  # fmt: skip
        payload = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


BASE_URL: list[str] = []


@pytest.fixture
def openai_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), OneIdTwice)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    BASE_URL[:] = [f"http://127.0.0.1:{httpd.server_address[1]}/v1"]
    yield BASE_URL[0]
    httpd.shutdown()
    httpd.server_close()


def openai_agent() -> ReActAgent:
    from intermission.agents.openai_compat import OpenAIChatModel

    model = OpenAIChatModel("test-model", base_url=BASE_URL[0], api_key="k", stream=False)
    return (
        ReActAgent.of(model)
        .name("payer")
        .tools(pay)
        .interceptor(HITLInterceptor().on_destructive())
        .build()
    )


def scripted_agent() -> ReActAgent:
    script: list[Any] = [
        [ToolCall("pay", {"account": "alice", "amount": 5}, "dup"),
         ToolCall("pay", {"account": "bob", "amount": 5}, "dup")],
        "Paid both.",
    ]  # fmt: skip
    return (
        ReActAgent.of(ScriptedModel(script))
        .name("payer")
        .tools(pay)
        .interceptor(HITLInterceptor().on_destructive())
        .build()
    )


AGENTS: dict[str, Callable[[], ReActAgent]] = {}
"""What the CLI's ``--agents`` reads (set by each test run)."""


@pytest.mark.parametrize("kind", ["openai", "scripted"])
def test_two_calls_with_one_id_in_a_reply_leave_the_session_loadable_and_decidable(
    kind: str,
    store_and_url: tuple[Any, Any],
    openai_server: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Case 5: the session pauses with two tasks under two call UUIDs (the provider's,
    then the same with a suffix); it saves and loads, ``pending()`` agrees, and the CLI's
    ``show`` and ``approve`` work on it. Each call runs once."""
    from intermission.cli import main

    store, url = store_and_url
    MOVED.clear()
    factory = openai_agent if kind == "openai" else scripted_agent
    first = "call_dup" if kind == "openai" else "dup"
    AGENTS.clear()
    AGENTS["payer"] = factory
    s = InMemoryAgentSession.of("p5")
    factory().prompt("pay alice and bob").session(s).call()
    assert s.is_pending and MOVED == []
    store.save(s)

    loaded = store.load("p5")  # loads: no "two tasks share a call UUID"
    uuids = [t.call_uuid for t in HITL.pending_tasks(loaded)]
    assert uuids == [t.call_uuid for t in HITL.pending_tasks(s)] == [first, f"{first}.2"]
    task = HITL.get_pending_task_by_call_uuid(loaded, first)
    assert task is not None and task.args["account"] == "alice"
    (item,) = store.pending()
    assert item.session_id == "p5" and [t.call_uuid for t in item.tasks] == uuids
    InMemoryAgentSession.restore(loaded.to_json())  # and its own snapshot passes through

    if url is None:  # a memory store lives in this process only: decide here
        HITL.approve_all(loaded)
        assert factory().prompt().session(loaded).call().is_abnormal is False
        store.save(loaded)
    else:
        capsys.readouterr()
        assert main(["show", "p5", "--store", url]) == 0
        shown = capsys.readouterr().out
        assert f"task:     {first} pay" in shown and f"task:     {first}.2 pay" in shown
        agents = f"{__name__}:AGENTS"
        assert main(["--agents", agents, "approve", "p5", "--store", url]) == 0
        assert "session p5 done" in capsys.readouterr().out
    assert sorted(MOVED) == [("alice", 5), ("bob", 5)]  # each once
    assert store.load("p5").status == "done" and store.pending() == []


# -- case 7: a fork approves edited arguments ------------------------------------------------
def test_a_fork_approving_edited_args_runs_its_own_effect_not_its_siblings(
    store_and_url: tuple[Any, Any], tmp_path: Path
) -> None:
    """Case 7: sibling A runs ``rename(prod)``; fork E approves ``modified_args(name=
    staging)`` — E's call is another effect: staging is sent and E is told so. A third
    fork approving the original arguments is A's effect (shared ledger): not sent again."""
    store, _ = store_and_url
    counts = tmp_path / "calls.jsonl"
    script: list[Any] = [[ToolCall("rename_user", {"user_id": 7, "name": "prod"})], "Done."]
    with ops_tools(counts) as tools:

        def build() -> ReActAgent:
            return (
                ReActAgent.of(ScriptedModel(script))
                .tools(*tools)
                .interceptor(HITLInterceptor().on_destructive())
                .build()
            )

        root = InMemoryAgentSession.of("root")
        build().prompt("rename user 7").session(root).call()
        assert root.is_pending
        store.save(root)
        for fork in ("a", "e", "f"):
            store.fork("root", fork)

        agent = build()
        a = store.load("a")
        HITL.approve_all(a)
        agent.prompt().session(a).call()
        store.save(a)
        assert observations(a)[-1] == "user 7 renamed to prod"

        agent = build()
        e = store.load("e")
        edit = HITLDecision.approve().modified_args({"name": "staging"})
        HITL.submit(e, HITL.pending_tasks(e)[0], edit, agent=agent)
        agent.prompt().session(e).call()
        store.save(e)
        assert observations(e)[-1] == "user 7 renamed to staging"
        assert server_calls(counts, "rename_user") == 2

        agent = build()
        f = store.load("f")
        HITL.approve_all(f)
        agent.prompt().session(f).call()
        assert observations(f)[-1] == "user 7 renamed to prod"  # A's result, not sent again
        assert server_calls(counts, "rename_user") == 2


def _as_written_before(text: str) -> str:
    """The snapshot as intermission wrote it before call UUIDs were made unique: both
    tasks and both tool calls under ``dup``, no effect ids."""
    data = json.loads(text)
    for t in data["hitl"]["tasks"]:
        t["call_uuid"] = "dup"
    trace = data["traces"]["payer"]
    for c in trace["last_reason"]["tool_calls"]:
        c["id"] = "dup"
    trace.pop("effect_ids")
    trace.pop("proposed")
    return json.dumps(data)


def test_a_session_stranded_by_an_older_version_loads_and_is_decided(
    store_and_url: tuple[Any, Any],
) -> None:
    """Case 5, for sessions already saved: a snapshot with two tasks under one call UUID
    (written before the fix) loads — restore, a store's put_snapshot and load — with the
    repeated id renamed consistently; approving runs each call once."""
    store, _ = store_and_url
    MOVED.clear()
    s = InMemoryAgentSession.of("p5-old")
    scripted_agent().prompt("pay alice and bob").session(s).call()
    old = _as_written_before(s.to_json())

    restored = InMemoryAgentSession.restore(old)
    assert [t.call_uuid for t in HITL.pending_tasks(restored)] == ["dup", "dup.2"]
    store.put_snapshot(old)
    loaded = store.load("p5-old")
    assert [(t.call_uuid, t.args["account"]) for t in HITL.pending_tasks(loaded)] == [
        ("dup", "alice"),
        ("dup.2", "bob"),
    ]
    HITL.approve_all(loaded)
    assert scripted_agent().prompt().session(loaded).call().content == "Paid both."
    assert sorted(MOVED) == [("alice", 5), ("bob", 5)]


# -- for all replies: ids that repeat, within a reply and across requests ---------------
class Recording(Tool):
    """A tool that records the identity each call runs under."""

    def __init__(self, runs: list[tuple[str, str, int]]) -> None:
        def act(n: int) -> str:
            """Act on ``n``."""
            return f"acted {n}"

        super().__init__(act, destructive=True)
        self.runs = runs

    async def invoke(
        self,
        args: dict[str, Any],
        session: Any = None,
        call_uuid: str | None = None,
        *,
        effect_id: str | None = None,
    ) -> Any:
        self.runs.append((call_uuid or "", effect_id or "", args["n"]))
        return await super().invoke(args, session, call_uuid, effect_id=effect_id)


provider_ids = st.one_of(st.none(), st.sampled_from(["call_0", "call_1", "a", "a.2", "x"]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(provider_ids, min_size=1, max_size=4), min_size=1, max_size=4))
def test_every_proposed_call_runs_once_under_an_identity_of_its_own(
    requests: list[list[str | None]],
) -> None:
    """For every sequence of requests whose replies give ids that repeat (within a reply,
    across requests, missing ones): every pause saves and loads, the call UUIDs of a
    batch are distinct, every approved call runs exactly once, and no two calls of the
    session share an effect id — even with a ``SequentialIds`` started again for every
    request (a new process each time)."""
    from intermission import SequentialIds

    runs: list[tuple[str, str, int]] = []
    script: list[Any] = []
    n = 0
    for ids in requests:
        calls = []
        for cid in ids:
            n += 1
            calls.append(ToolCall("act", {"n": n}, cid))
        script += [calls, "done"]
    s = InMemoryAgentSession.of("prop")
    for ids in requests:
        def agent() -> ReActAgent:  # built again each time: a fresh id factory
            return (
                ReActAgent.of(ScriptedModel(script))
                .tools(Recording(runs))
                .interceptor(HITLInterceptor().on_destructive())
                .ids(SequentialIds())
                .build()
            )

        agent().prompt("go").session(s).call()
        s = InMemoryAgentSession.restore(s.to_json())
        uuids = [t.call_uuid for t in HITL.pending_tasks(s)]
        assert len(uuids) == len(ids) == len(set(uuids))
        for cid, uuid in zip(ids, uuids, strict=True):
            assert cid is None or uuid == cid or uuid.startswith(f"{cid}.")
        HITL.approve_all(s)
        assert agent().prompt().session(s).call().content == "done"
    assert sorted(r[2] for r in runs) == list(range(1, n + 1))  # each call once
    assert len({r[1] for r in runs}) == n  # each its own effect id


def test_a_callable_approver_policy_is_the_agent_instances_own() -> None:
    """R49 for who may decide: agent A lets only the lead approve ``pay``; agent B, same
    name, lets anyone — and pauses last. A's task still refuses another reviewer (the
    policy comes from A's interceptor, not from the last one to pause)."""
    from intermission import ReviewerNotAllowedError

    def build(who: Callable[[str | None, Any], bool]) -> ReActAgent:
        script: list[Any] = [[ToolCall("pay", {"account": "a", "amount": 1}, "c")], "ok"]
        hitl = HITLInterceptor().on_destructive().approvers(who)
        return ReActAgent.of(ScriptedModel(script)).tools(pay).interceptor(hitl).build()

    a = build(lambda reviewer, task: reviewer == "lead")
    s_a = InMemoryAgentSession.of("pa")
    a.prompt("pay").session(s_a).call()
    b = build(lambda reviewer, task: True)
    s_b = InMemoryAgentSession.of("pb")
    b.prompt("pay").session(s_b).call()
    assert a.name == b.name and s_a.is_pending and s_b.is_pending

    before = s_a.to_json()
    with pytest.raises(ReviewerNotAllowedError):
        HITL.submit(s_a, "c", HITLDecision.approve().reviewer("mallory"))
    assert s_a.to_json() == before
    HITL.submit(s_b, "c", HITLDecision.approve().reviewer("mallory"))  # B's own rule
    HITL.submit(s_a, "c", HITLDecision.approve().reviewer("lead"), agent=a)
