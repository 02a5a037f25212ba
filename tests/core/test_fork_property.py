"""R43/R44 as a property (≥ 300 random graphs): fork a run at any of its checkpoints (every
node, and every request end) and resume the fork with the same decisions: it ends with the
same context, the same task runs and the same event kinds as the original did from that
point; and nothing the fork does changes its parent (``to_json()`` before and after). Every
work item has a ledgered effect: forks that share the ledger (or preview it, dry-run) get
its recorded results and run none again; a separate fork runs those after its checkpoint.

Decisions live in the context here (which planned pauses were answered), so a fork carries
them exactly as the checkpoint had them; the original's pauses after the fork point happen
in the fork too, and are answered the same way: by resuming.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._graphs import Block, Builder, blocks

from intermission import FlowContext, FlowEngine, InMemoryAgentSession, Node


class InContext:
    """A task whose every decision is in the session: the plan of pauses, the pauses
    taken, the order of runs."""

    def __init__(self, plan: set[tuple[str, int]]) -> None:
        self.plan = {f"{nid}#{k}" for nid, k in plan}
        self.effects: dict[str, int] = {}
        """How often each work item's external effect really ran."""

    def effect(self, mark: str) -> str:
        self.effects[mark] = self.effects.get(mark, 0) + 1
        return mark.upper()

    def task(self, ctx: FlowContext, node: Node) -> None:
        nid = node.id
        ctx.put("runs", [*ctx.get("runs", []), nid])
        k = ctx.get(f"w:{nid}", 0) + 1
        mark = f"{nid}#{k}"
        if mark in self.plan and mark not in ctx.get("paused", []):
            ctx.put("paused", [*ctx.get("paused", []), mark])
            assert ctx.session is not None
            ctx.session.pending(True, f"pause at {mark}")
            return
        ctx.put(f"w:{nid}", k)
        assert ctx.session is not None
        done = ctx.session.once(mark, lambda: self.effect(mark))  # a ledgered effect
        ctx.put("acc", (ctx.get("acc", 7) * 31 + sum(map(ord, done))) % 1_000_003)


def _finish(engine: FlowEngine, spec: Any, s: InMemoryAgentSession) -> None:
    if s.status == "done":  # forked at the end: nothing is left to run
        return
    for _ in range(300):
        if engine.eval(spec, s.context).is_done:
            return
    raise AssertionError("did not finish")


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(block=blocks(), data=st.data())
def test_a_fork_at_any_checkpoint_resumes_like_the_original_from_there(
    block: Block, data: st.DataObject
) -> None:
    # the planned pauses: a few work items of the graph, by node and run number
    probe = InContext(set())
    probe_spec = Builder(probe).build(block)
    p = InMemoryAgentSession.of("probe")
    p.context.put("items", [1, 2])
    FlowEngine().eval(probe_spec, p.context)
    runs = p.context["runs"]
    works = sorted({(nid, k) for nid in set(runs) for k in range(1, runs.count(nid) + 1)})
    plan = set(data.draw(st.lists(st.sampled_from(works), max_size=3))) if works else set()

    harness = InContext(plan)
    spec = Builder(harness).build(block)
    engine = FlowEngine(checkpoints="node")
    original = InMemoryAgentSession("orig", max_events=100_000, max_checkpoints=10_000)
    original.context.put("items", [1, 2])
    for _ in range(300):
        steps = data.draw(st.one_of(st.none(), st.integers(1, 5)), label="steps")
        if engine.eval(spec, original.context, steps=steps).is_done:
            break
        if data.draw(st.booleans(), label="through a snapshot"):
            original = InMemoryAgentSession.restore(original.to_json())
    else:
        raise AssertionError("did not finish")
    history = original.history
    assert [c.index for c in history] == list(range(len(history)))
    assert history[-1].status == "done"
    assert set(harness.effects.values()) <= {1}  # each effect once in the original
    at = data.draw(st.sampled_from(history), label="checkpoint")
    effects = data.draw(st.sampled_from(["shared", "dry-run", "separate"]), label="effects")
    before = original.to_json()
    ran_before = dict(harness.effects)
    fork = original.fork("fork", at, effects=effects)
    assert fork.parent == ("orig", at.index)
    assert len(fork.events) == at.events and fork.history[-1].index == at.index
    works_at_fork = sum(v for k, v in fork.context.data.items() if k.startswith("w:"))
    _finish(FlowEngine(checkpoints="node"), spec, fork)
    assert original.to_json() == before  # the fork changed nothing of its parent
    assert fork.context.data == original.context.data  # same context, same runs in order
    rerun = sum(harness.effects.values()) - sum(ran_before.values())
    works_after = sum(v for k, v in fork.context.data.items() if k.startswith("w:"))
    # shared: every effect the fork reaches ran already in the family, so its recorded
    # result comes back; dry-run: the same (only effects that never ran are skipped);
    # separate: the fork's own ledger runs each again
    assert rerun == (works_after - works_at_fork if effects == "separate" else 0)
    assert fork.events.kinds()[at.events :] == original.events.kinds()[at.events :]
    assert json.loads(fork.to_json())["session_id"] == "fork"
