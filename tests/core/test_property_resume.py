"""R11 as a property: pausing anywhere, any number of times, changes nothing but the
paused nodes' extra runs — also through JSON snapshots into fresh session objects."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._graphs import Block, Builder, Harness, blocks

from intermission import FlowEngine, InMemoryAgentSession


def run_plain(block: Block) -> tuple[dict[str, Any], dict[str, int]]:
    h = Harness()
    spec = Builder(h).build(block)
    s = InMemoryAgentSession.of("plain")
    s.context.put("items", [1, 2])
    assert FlowEngine().eval(spec, s.context).is_done
    return dict(s.context.data), h.calls


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(block=blocks(), data=st.data())
def test_r11_pause_anywhere_resume_equals_uninterrupted(block: Block, data: st.DataObject) -> None:
    plain_ctx, plain_calls = run_plain(block)
    works = [(nid, k) for nid, n in plain_calls.items() for k in range(1, n + 1)]
    plan = set(data.draw(st.lists(st.sampled_from(works), max_size=4))) if works else set()
    h = Harness(plan=plan)
    spec = Builder(h).build(block)
    s = InMemoryAgentSession.of("paused")
    s.context.put("items", [1, 2])
    engine = FlowEngine()
    for _ in range(200):
        steps = data.draw(st.one_of(st.none(), st.integers(1, 6)), label="steps")
        result = engine.eval(spec, s.context, steps=steps)
        if result.is_done:
            break
        if data.draw(st.booleans(), label="through snapshot"):
            s = InMemoryAgentSession.restore(s.to_json())
    else:
        raise AssertionError("did not finish")
    assert dict(s.context.data) == plain_ctx
    expected = dict(plain_calls)
    for nid, _k in h.paused:
        expected[nid] += 1
    assert h.calls == expected
    assert h.paused == plan
