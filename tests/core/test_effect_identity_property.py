"""R48 as a property (issue 20): whatever a person does with sessions — prompts that pause on
approvals, approvals with and without edited arguments, skips and rejections, forks in all
three effect modes (forks of forks, forks of previews), deletes and new sessions under a
deleted id — and however a model numbers its calls (``call_0`` in every reply, two calls
sharing one id, no id at all), every approved effect runs exactly once per identity, an
effect nobody approved never runs, and every stored session loads.

The effect is an MCP tool (intermission's own ``MCPTool``, so its ledger key is the one
real servers get) over an in-process connection whose every call appends to ``world``: the
runs are counted there, never in the ledger. The test keeps its own model of what should
have run: an effect's identity is (ledger family, the proposal it came from, the position
in that reply, the arguments that run). The family is the model's too: a new session starts
one, a ``shared`` fork joins its parent's, a ``separate`` fork starts one, a ``dry-run``
fork — and any fork of a preview — is a preview, where nothing runs.

``CI=true`` runs 300 examples (locally 40; ``IM_PROPERTY_EXAMPLES`` overrides) on the
memory and SQLite stores, and on PostgreSQL when ``INTERMISSION_PG_DSN`` is set; the totals
are printed at the end of the session.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import END_LINES, IN_CI, PG_DSN, fresh_pg, need_module

from intermission import (
    HITL,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    SequentialIds,
)
from intermission.agents.scripted import ScriptedModel
from intermission.messages import ChatMessage, ToolCall

EXAMPLES = int(os.environ.get("IM_PROPERTY_EXAMPLES", 150 if IN_CI else 40))
STORES = ["memory", "sqlite", *(["postgres"] if PG_DSN else [])]
TOTALS: Counter[str] = Counter()
"""What the examples did, over the whole run (printed at the end)."""


@pytest.fixture(scope="module", autouse=True)
def _report_totals() -> Iterator[None]:
    yield
    if not TOTALS:
        return
    keys = ("examples", "steps", "prompts", "approvals", "edited approvals", "skips",
            "rejections", "resumes", "effects run", "effects reused", "forks", "previews",
            "deletes", "provider call ids", "replies repeating an id", "forks back in time",
            "fresh agents", "loads")  # fmt: skip
    line = "effect identity property: " + ", ".join(f"{TOTALS[k]} {k}" for k in keys)
    line += " (stores: " + ", ".join(f"{s} {TOTALS['store ' + s]}" for s in STORES) + ")"
    END_LINES.append(line)


# -- the world and the agent -------------------------------------------------------------
class World:
    """The MCP server's side: every call it receives, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.name = "deploys"

    def identity(self) -> str:
        return self.name

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        self.calls.append(args["target"])
        text = SimpleNamespace(type="text", text=f"deployed {args['target']}")
        return SimpleNamespace(content=[text], is_error=False)


def _deploy(world: World) -> Any:
    from intermission.agents.mcp_tool import MCPTool

    spec = SimpleNamespace(
        name="deploy",
        description="Deploy a build to a target.",
        annotations=SimpleNamespace(destructive_hint=True, idempotent_hint=True),
        input_schema={
            "type": "object",
            "properties": {"target": {"type": "string"}},
            "required": ["target"],
        },
    )
    return MCPTool(world, spec)  # type: ignore[arg-type]


def _reply(messages: list[ChatMessage], tools: Any) -> Any:
    """The model: a prompt is a JSON list of calls ``[target, id]`` to propose; after the
    tool results (or a skip), a final answer."""
    last = messages[-1]
    if last.role != "user":
        return "done"
    return [ToolCall("deploy", {"target": t}, i) for t, i in json.loads(last.content)]


def _agent(world: World, ids: SequentialIds | None) -> ReActAgent:
    """A fresh agent on the same world: the default random ids, or ``ids`` (one
    ``SequentialIds`` for the whole example, as in one notebook kernel)."""
    builder = ReActAgent.of(ScriptedModel(_reply))
    if ids is not None:
        builder = builder.ids(ids)
    return (
        builder.name("ops")
        .tools(_deploy(world))
        .interceptor(HITLInterceptor().on_destructive())
        .build()
    )


# -- the model of what should happen -----------------------------------------------------
@dataclass
class Known:
    """What the test knows of one stored session."""

    family: int | None
    """The model's family token; None for a preview (nothing runs)."""
    pending: list[tuple[int, int, str]] = field(default_factory=list)
    """At its latest checkpoint: the proposed calls it waits on (proposal, index, target)."""
    decisions: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    """Index → (verdict, target that runs), submitted since that checkpoint."""
    checkpoints: list[list[tuple[int, int, str]]] = field(default_factory=list)
    """Its history: the open calls at every request end, oldest first."""


@dataclass
class Model:
    live: dict[str, Known] = field(default_factory=dict)
    ran: set[tuple[int, int, int, str]] = field(default_factory=set)
    """Identities that ran: (family, proposal, index, target)."""
    families: int = 0
    proposals: int = 0

    def new_family(self) -> int:
        self.families += 1
        return self.families


IDS = ["call_0", "call_1", "call_2"]
TARGETS = ["prod", "staging", "eu"]
SIDS = ["a", "b", "c", "d", "e"]
CALLS = st.lists(
    st.tuples(st.sampled_from(TARGETS), st.sampled_from([*IDS, None])), min_size=1, max_size=2
)


def _draw_step(run: Run, data: st.DataObject) -> tuple[Any, ...]:
    """The next step, among those that apply to the sessions as they stand."""
    live = run.model.live
    idle = [s for s in SIDS if s not in live or not live[s].pending]
    waiting = [s for s, k in live.items() if len(k.decisions) < len(k.pending)]
    ready = [s for s, k in live.items() if k.pending and len(k.decisions) == len(k.pending)]
    forkable = [s for s, k in live.items() if k.checkpoints]
    free = [s for s in SIDS if s not in live]
    # weighted towards what reaches effects: decisions, resumes, forks of paused sessions
    options = ["prompt"] * 2 * bool(idle) + ["decide"] * 4 * bool(waiting)
    options += ["resume"] * 4 * bool(ready) + ["fork"] * 3 * bool(forkable and free)
    options += ["delete"] * bool(live)
    name = data.draw(st.sampled_from(options))
    if name == "prompt":
        ids = data.draw(st.sampled_from(["numbered", "shared", "given", "none"]))
        sid = data.draw(st.sampled_from(idle))
        return (name, sid, data.draw(CALLS), ids, data.draw(st.booleans()))
    if name == "decide":
        verdict = data.draw(st.sampled_from(["approve"] * 3 + ["edit", "skip", "reject"]))
        return (name, data.draw(st.sampled_from(waiting)), data.draw(st.integers(0, 2)),
                verdict, data.draw(st.sampled_from(TARGETS)))  # fmt: skip
    if name == "resume":
        return (name, data.draw(st.sampled_from(ready)), data.draw(st.booleans()))
    if name == "fork":
        effects = data.draw(st.sampled_from(["shared"] * 3 + ["dry-run", "separate"]))
        paused = [s for s in forkable if live[s].pending]  # (where forks meet effects)
        near = paused if paused and data.draw(st.integers(0, 2)) else forkable
        source = data.draw(st.sampled_from(near))
        back = data.draw(st.integers(0, 3))  # 0: the latest checkpoint
        return (name, source, data.draw(st.sampled_from(free)), effects, back)
    return (name, data.draw(st.sampled_from(sorted(live))))


def _calls(calls: list[tuple[str, str | None]], ids: str) -> list[list[Any]]:
    """How the model numbers the calls of one reply: per reply from ``call_0`` (as test
    models and some providers do, so every request reuses them), all with one id, the
    ids drawn, or none (the agent mints them)."""
    if ids == "numbered":
        return [[t, f"call_{i}"] for i, (t, _) in enumerate(calls)]
    if ids == "shared":
        return [[t, "call_0"] for t, _ in calls]
    if ids == "none":
        return [[t, None] for t, _ in calls]
    return [[t, i] for t, i in calls]


def _store(kind: str, tmp: Path) -> Any:
    from intermission.stores import MemoryStore, SQLiteStore

    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(tmp / "s.db")
    return fresh_pg()


class Run:
    """One example: the store, the world, the model, and the steps applied to them."""

    def __init__(self, store: Any, ids: str) -> None:
        self.store = store
        self.world = World()
        self.ids = SequentialIds() if ids == "sequential" else None
        self.agent = _agent(self.world, self.ids)
        self.model = Model()

    def fresh_agent(self, fresh: bool) -> ReActAgent:
        if fresh:
            self.agent = _agent(self.world, self.ids)
            TOTALS["fresh agents"] += 1
        return self.agent

    def ran_since(self, before: int) -> Counter[str]:
        return Counter(self.world.calls[before:])

    # -- steps ---------------------------------------------------------------------------
    def prompt(self, sid: str, calls: list[tuple[str, str | None]], ids: str, fresh: bool) -> None:
        known = self.model.live.get(sid)
        if known is not None and known.pending:
            return  # it waits for decisions first
        replies = _calls(calls, ids)
        TOTALS["prompts"] += 1
        TOTALS["provider call ids"] += sum(1 for _, i in replies if i is not None)
        ids_given = [i for _, i in replies if i is not None]
        TOTALS["replies repeating an id"] += len(ids_given) != len(set(ids_given))
        before = len(self.world.calls)
        self.fresh_agent(fresh)
        if known is None:  # a new session (maybe under a deleted id): a family of its own
            known = Known(self.model.new_family())
            session = InMemoryAgentSession(sid)
            self.agent.prompt(json.dumps(replies)).session(session).call()
            self.store.save(session)
            self.model.live[sid] = known
        else:
            with self.store.claim(sid) as session:
                self.agent.prompt(json.dumps(replies)).session(session).call()
        assert not self.ran_since(before), "a proposed call ran before anyone approved it"
        self.model.proposals += 1
        known.pending = [(self.model.proposals, i, t) for i, (t, _) in enumerate(replies)]
        known.decisions = {}
        known.checkpoints.append(list(known.pending))
        tasks = HITL.pending_tasks(self.store.load(sid))
        assert [t.args["target"] for t in tasks] == [t for t, _ in replies]
        assert len({t.call_uuid for t in tasks}) == len(tasks)  # unique, whatever the model

    def decide(self, sid: str, index: int, verdict: str, edited: str) -> None:
        known = self.model.live.get(sid)
        if known is None or not known.pending:
            return
        undecided = [i for i in range(len(known.pending)) if i not in known.decisions]
        if not undecided:
            return
        index = undecided[index % len(undecided)]
        session = self.store.load(sid)
        position = undecided.index(index)
        task = HITL.pending_tasks(session)[position]  # (the undecided ones, in order)
        target = known.pending[index][2]
        assert task.args["target"] == target
        if verdict == "approve":
            decision, runs = HITLDecision.approve(), target
        elif verdict == "edit":
            decision, runs = HITLDecision.approve().modified_args({"target": edited}), edited
            TOTALS["edited approvals"] += 1
        elif verdict == "skip":
            decision, runs = HITLDecision.skip("not now"), None
        else:
            decision, runs = HITLDecision.reject("no"), None
        kind = "approvals" if runs is not None else "skips" if verdict == "skip" else "rejections"
        TOTALS[kind] += 1
        HITL.submit(session, task.call_uuid, decision, agent=self.agent)
        self.store.save(session)
        known.decisions[index] = (verdict, runs)

    def resume(self, sid: str, fresh: bool) -> None:
        known = self.model.live.get(sid)
        if known is None or not known.pending or len(known.decisions) < len(known.pending):
            return
        before = len(self.world.calls)
        agent = self.fresh_agent(fresh)
        with self.store.resume(sid) as session:
            agent.prompt().session(session).call()
        expected: Counter[str] = Counter()
        for index, (proposal, _, _) in enumerate(known.pending):
            runs = known.decisions[index][1]
            if runs is None:
                continue
            if known.family is None:
                continue  # a preview runs nothing
            identity = (known.family, proposal, index, runs)
            if identity in self.model.ran:
                TOTALS["effects reused"] += 1
                continue
            self.model.ran.add(identity)
            expected[runs] += 1
        ran = self.ran_since(before)
        assert ran == expected, (
            f"resuming {sid!r} (family {known.family}) ran {dict(ran)}, expected "
            f"{dict(expected)}: pending {known.pending}, decisions {known.decisions}"
        )
        TOTALS["effects run"] += sum(ran.values())
        TOTALS["resumes"] += 1
        known.pending, known.decisions = [], {}
        known.checkpoints.append([])

    def fork(self, source: str, new: str, effects: str, back: int) -> None:
        known = self.model.live.get(source)
        if known is None or new in self.model.live or not known.checkpoints:
            return
        at = len(known.checkpoints) - 1 - back % len(known.checkpoints)
        fork = self.store.fork(source, new, at, effects=effects)
        assert fork.parent == (source, at)
        preview = known.family is None or effects == "dry-run"
        if preview:
            family = None
            TOTALS["previews"] += 1
        else:
            family = known.family if effects == "shared" else self.model.new_family()
        assert (fork.effects == "dry-run") == preview
        # the fork stands where the source stood at that checkpoint: its open calls then,
        # none of the decisions made since
        kept = [list(c) for c in known.checkpoints[: at + 1]]
        self.model.live[new] = Known(family, list(kept[-1]), {}, kept)
        TOTALS["forks back in time"] += at < len(known.checkpoints) - 1
        TOTALS["forks"] += 1

    def delete(self, sid: str) -> None:
        if self.model.live.pop(sid, None) is not None:
            self.store.delete(sid)
            TOTALS["deletes"] += 1

    def check_loads(self) -> None:
        for sid, known in self.model.live.items():
            session = self.store.load(sid)
            again = InMemoryAgentSession.restore(session.to_json())
            assert again.to_json() == session.to_json()
            open_calls = len(known.pending) - len(known.decisions)
            assert len(HITL.pending_tasks(session)) == open_calls
            TOTALS["loads"] += 1
        listed = {p.session_id for p in self.store.pending(limit=50)}
        assert listed == {sid for sid, k in self.model.live.items() if k.pending}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    kind=st.sampled_from(STORES),
    ids=st.sampled_from(["random", "sequential"]),
    length=st.integers(1, 20),
    data=st.data(),
)
def test_every_approved_effect_runs_once_per_identity_and_every_session_loads(
    kind: str, ids: str, length: int, data: st.DataObject
) -> None:
    need_module("jsonschema", "MCP tools need jsonschema (extra mcp)")
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(kind, Path(tmp))
        try:
            run = Run(store, ids)
            for _ in range(length):
                name, *args = _draw_step(run, data)
                getattr(run, name)(*args)
                TOTALS["steps"] += 1
            run.check_loads()
            # nothing ran that the model did not expect, over the whole example
            assert sum(Counter(run.world.calls).values()) == len(run.model.ran)
        finally:
            store.close()
    TOTALS["examples"] += 1
    TOTALS["store " + kind] += 1


def test_effect_ids_from_a_restarted_sequential_factory_stay_unique_in_a_family() -> None:
    need_module("jsonschema", "MCP tools need jsonschema (extra mcp)")
    from intermission.stores import MemoryStore

    run = Run(MemoryStore(), "sequential")

    def new_process() -> None:  # every agent a new process: its SequentialIds restarts
        run.ids = SequentialIds()

    run.prompt("a", [("prod", None)], "none", False)
    run.decide("a", 0, "approve", "prod")
    run.resume("a", False)
    run.fork("a", "b", "shared", 0)  # one family, both at proposal count 1
    new_process()
    run.prompt("b", [("prod", None)], "none", True)  # effect-1.2 in b…
    run.decide("b", 0, "approve", "prod")
    run.resume("b", False)
    new_process()
    run.prompt("a", [("prod", None)], "none", True)  # …and effect-1.2 in a: another call
    run.decide("a", 0, "approve", "prod")
    run.resume("a", False)  # approved, and must run
    assert run.world.calls == ["prod", "prod", "prod"]
