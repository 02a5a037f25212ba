"""The depth limit agrees (R42, R50; adversary repro 06): a value nested up to
``MAX_DEPTH`` that ``context.put`` (or an effect's result, or a tool call's arguments)
accepts is saved by every store and loads again — the loader counts a value's depth from
the value, as the entry point does, not from the snapshot's root — and one level deeper is
refused at the entry point with a typed error naming the limit, changing nothing. Context
keys likewise: one the loader refuses (a lone surrogate) is refused by ``put``."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intermission import (
    InMemoryAgentSession,
    NotSerializableError,
    ReActAgent,
    ScriptedModel,
    tool,
)
from intermission.limits import MAX_DEPTH
from intermission.messages import ToolCall


def nest(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def test_a_value_at_the_limit_is_saved_and_loads_on_every_store(make_store: Any) -> None:
    store = make_store()
    s = InMemoryAgentSession.of("deep")
    s.context.put("v", nest(MAX_DEPTH))  # exactly the limit: accepted
    s.once("effect", lambda: nest(MAX_DEPTH, "r"))
    store.save(s)
    loaded = store.load("deep")  # was SnapshotSchemaError: 'nested deeper than 100 levels'
    assert loaded.context["v"] == nest(MAX_DEPTH)
    assert loaded.ledger["effect"].result == nest(MAX_DEPTH, "r")
    assert loaded.to_json() == s.to_json()
    assert InMemoryAgentSession.restore(s.to_json()).to_json() == s.to_json()
    with store.claim("deep") as again:  # and it saves and loads again as a claimed copy
        again.context.put("w", nest(MAX_DEPTH, True))
    assert store.load("deep").context["w"] == nest(MAX_DEPTH, True)
    store.delete("deep")
    assert store.put_snapshot(s.to_json()) == 1


def test_one_level_deeper_is_refused_at_put_naming_the_limit() -> None:
    s = InMemoryAgentSession.of("deep")
    before = s.to_json()
    with pytest.raises(NotSerializableError, match=f"nested deeper than {MAX_DEPTH} levels"):
        s.context.put("v", nest(MAX_DEPTH + 1))
    assert s.to_json() == before


def test_tool_arguments_at_the_limit_load_again(make_store: Any) -> None:
    store = make_store()

    @tool
    def deep(x: Any) -> str:
        """Take a deep value."""
        return "ok"

    def script(messages: list[Any], _info: Any) -> Any:
        done = any(m.role == "tool" for m in messages)
        return "Done." if done else [ToolCall("deep", {"x": nest(MAX_DEPTH - 1)})]

    s = InMemoryAgentSession.of("args")
    agent = ReActAgent.of(ScriptedModel(script)).name("a").tools(deep).build()
    agent.prompt("go").session(s).call()
    store.save(s)
    assert store.load("args").to_json() == s.to_json()
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        ToolCall("deep", {"x": nest(MAX_DEPTH)})  # one deeper: refused where it is made


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)


@st.composite
def nested(draw: st.DrawFn) -> Any:
    """A value nested around the limit, lists and dicts mixed, with siblings."""
    value = draw(SCALARS)
    for _ in range(draw(st.integers(MAX_DEPTH - 3, MAX_DEPTH + 2))):
        if draw(st.booleans()):
            value = [draw(SCALARS), value][draw(st.integers(0, 1)) :]
        else:
            value = {draw(st.text(max_size=3)): value, "~": draw(SCALARS)}
    return value


def test_any_value_put_accepts_round_trips_through_every_store(make_store: Any) -> None:
    store = make_store()
    ids = itertools.count()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(value=nested())
    def check(value: Any) -> None:
        s = InMemoryAgentSession.of(f"p{next(ids)}")
        before = s.to_json()
        try:
            s.context.put("v", value)
        except NotSerializableError:
            assert s.to_json() == before  # refused: nothing changed
            return
        s.once("effect", lambda: value)
        store.save(s)
        loaded = store.load(s.session_id)
        assert loaded.to_json() == s.to_json()
        assert loaded.context["v"] == value
        assert InMemoryAgentSession.restore(s.to_json()).to_json() == s.to_json()

    check()


def test_a_context_key_the_loader_refuses_is_refused_at_put() -> None:
    """The same rule for keys: one with a lone surrogate was accepted by ``put`` and saved,
    and no loader took the snapshot back."""
    s = InMemoryAgentSession.of("key")
    before = s.to_json()
    for put in (lambda: s.context.put("a\ud800", 1), lambda: s.context.__setitem__("\udcff", 2)):
        with pytest.raises(NotSerializableError, match="lone surrogate"):
            put()
    assert s.to_json() == before
    s.context.put("caf\u00e9 \U0001f600", 1)  # other text keys are fine
    assert InMemoryAgentSession.restore(s.to_json()).context["caf\u00e9 \U0001f600"] == 1
