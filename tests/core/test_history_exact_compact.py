"""History is exact and compact (R50, issue 20 cases 9 and 10): JSON types are kept at
every depth (``1``, ``1.0`` and ``True`` differ), and a list that grows, shrinks or slides
costs each checkpoint what changed, not a copy of the list."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intermission import HITL, InMemoryAgentSession, decide_graph
from intermission.core.history import apply_patch, check_patch, diff, same
from intermission.examples import build_change_graph, build_ops_agent

VALUES: list[Any] = [1, True, 1.0, {"n": 1}, {"n": True}, {"n": 1.0}, [1], [True], [[1.0]]]


def _typed(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_values_python_calls_equal_are_different_values() -> None:
    assert not same({"n": 1}, {"n": True}) and not same([1], [1.0]) and not same(0.0, -0.0)
    assert same({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})
    assert diff({"n": 1}, {"n": True}) == {"n": [True]}
    assert diff({"x": {"n": 1}}, {"x": {"n": 1}}) is None


@pytest.mark.parametrize("store_kind", ["memory", "sqlite", "postgres"])
def test_a_fork_restores_the_value_the_session_had_with_its_type(make_store: Any) -> None:
    """{"n": 1} → {"n": True} → {"n": 1.0} → 1 → 1.0 …: every checkpoint's fork holds the
    value as it was, JSON type included, from the session and from every store."""
    store = make_store()
    s = InMemoryAgentSession("typed")
    for value in VALUES:
        s.context.put("cfg", value)
        s.context.put("deep", {"list": [value, {"v": value}]})
        s.record_checkpoint()
    store.save(s)
    for source in (s, store.load("typed")):
        assert len(source.history) == len(VALUES)
        for i, value in enumerate(VALUES):
            fork = source.fork(f"f{i}", at=i)
            assert _typed(fork.context.get("cfg")) == _typed(value), (i, value)
            assert _typed(fork.context.get("deep")) == _typed({"list": [value, {"v": value}]})


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False)
    | st.sampled_from([0.0, -0.0, 1.0]) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=2), inner,
                                                                 max_size=4),
    max_leaves=40,
)  # fmt: skip


def _edited(items: list[Any], data: st.DataObject) -> list[Any]:
    """A list as a session changes one: items appended, dropped from either end, edited."""
    out = list(items)
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["append", "drop_head", "drop_tail", "edit", "insert"]))
        if op == "append":
            out.extend(data.draw(st.lists(JSON, max_size=5)))
        elif op == "drop_head":
            del out[: data.draw(st.integers(0, 5))]
        elif op == "drop_tail" and out:
            del out[len(out) - data.draw(st.integers(0, len(out))) :]
        elif op == "edit" and out:
            out[data.draw(st.integers(0, len(out) - 1))] = data.draw(JSON)
        elif op == "insert":
            out.insert(data.draw(st.integers(0, len(out))), data.draw(JSON))
    return out


@settings(max_examples=400, deadline=None)
@given(old=JSON, new=JSON, items=st.lists(JSON, max_size=30), data=st.data())
def test_a_patch_rebuilds_exactly_the_value_it_was_taken_from(
    old: Any, new: Any, items: list[Any], data: st.DataObject
) -> None:
    for a, b in ((old, new), ({"k": old}, {"k": new}), (items, _edited(items, data))):
        patch = diff(a, b)
        if patch is None:
            assert _typed(a) == _typed(b)
            continue
        assert check_patch(patch) is None
        assert _typed(apply_patch(a, patch)) == _typed(b)
        # and it survives the trip through a snapshot's JSON
        assert _typed(apply_patch(a, json.loads(json.dumps(patch)))) == _typed(b)


def test_a_list_that_grows_or_shrinks_costs_what_changed() -> None:
    big = [{"role": "user", "content": f"message {i} " + "x" * 200} for i in range(50)]
    added = {"role": "assistant", "content": "y"}
    for old, new in (
        (big, [*big, added]),  # append
        ([*big, added], big),  # truncation (a backward patch of an append)
        (big, [*big[3:], added]),  # a window that slid: the oldest went
        ([*big[3:], added], big),
    ):
        patch = diff({"messages": old}, {"messages": new})
        # at most the three items that went and the one that came, not the 12 KB list
        assert len(json.dumps(patch)) < 4 * 250, patch
        assert _typed(apply_patch({"messages": old}, patch)) == _typed({"messages": new})


def test_old_patch_forms_still_apply() -> None:
    # snapshots written before R50 hold only [], [value], ["+", items] leaves
    assert apply_patch({"m": [1, 2]}, {"m": ["+", [3]], "x": []}) == {"m": [1, 2, 3]}
    assert check_patch({"m": ["+", [3]], "x": [], "y": [[1]]}) is None
    assert check_patch({"m": ["~", [[0, 1], [[2]]]]}) is None
    for bad in (["~", [[1, 0]]], ["~", [[0, 1, 2]]], ["~", [["a", 1]]], ["~", [7]]):
        assert check_patch({"m": bad}) is not None


def _ops_cycles(n: int, max_checkpoints: int) -> InMemoryAgentSession:
    agent = build_ops_agent()
    s = InMemoryAgentSession("ops", max_checkpoints=max_checkpoints)
    for i in range(n):
        agent.prompt(f"delete user 1001 ({i})").session(s).call()
        HITL.approve_all(s, reviewer="alice")
        agent.prompt().session(s).call()
    return s


def _change_cycles(n: int, max_checkpoints: int) -> InMemoryAgentSession:
    team = build_change_graph(lambda cid: f"applied {cid}")
    s = InMemoryAgentSession("change", max_checkpoints=max_checkpoints)
    for i in range(n):
        team.prompt(f"Upgrade {i}").session(s).call()
        if s.status == "pending":
            decide_graph(s, "APPROVE", reviewer="alice")
            team.prompt().session(s).call()
    return s


@pytest.mark.parametrize("cycles", [_ops_cycles, _change_cycles], ids=["ops", "change"])
def test_sixty_request_cycles_keep_history_within_half_the_session_again(cycles: Any) -> None:
    """The steady state (messages bounded by max_messages, so the oldest go as new ones
    come): history on costs at most 1.5× the snapshot with it off, and the bytes per
    checkpoint stay bounded (the last 20 cost no more than the first 20)."""
    on, off = cycles(60, 50), cycles(60, 0)
    size_on, size_off = len(on.to_json().encode()), len(off.to_json().encode())
    assert size_on <= 1.5 * size_off, (size_on, size_off)
    marks = json.loads(on.to_json())["history"]["marks"]
    assert len(marks) == 50
    sizes = [len(json.dumps(m)) for m in marks]
    assert max(sizes[-21:-1]) <= 2 * max(sizes[:20]) and max(sizes) < 4000, sizes
    # and every checkpoint still reads back the state it had
    loaded = InMemoryAgentSession.restore(on.to_json())
    assert loaded.history == on.history
    assert len(loaded.fork("early", at=loaded.history[0]).messages) == len(
        on.fork("early2", at=on.history[0]).messages
    )


def _diff_before_r50(old: Any, new: Any) -> Any:
    """The patches snapshots were written with before R50 (main at f83c15a): a list is
    extended with ``["+", items]`` or replaced whole."""
    if old == new and type(old) is type(new):
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, Any] = {}
        for key, value in new.items():
            if key not in old:
                out[key] = [value]
            else:
                sub = _diff_before_r50(old[key], value)
                if sub is not None:
                    out[key] = sub
        for key in old:
            if key not in new:
                out[key] = []
        return out
    if (
        isinstance(old, list) and isinstance(new, list) and len(new) > len(old)
        and new[: len(old)] == old
    ):  # fmt: skip
        return ["+", new[len(old) :]]
    return [new]


def test_a_snapshot_written_with_the_old_patches_still_loads_and_reads_back() -> None:
    s = _ops_cycles(12, 50)
    states = s._history.states()
    data = json.loads(s.to_json())
    marks = data["history"]["marks"]
    for i in range(len(marks) - 1):  # every patch as the old code wrote it
        back = _diff_before_r50(states[i + 1], states[i]) or {}
        marks[i].pop("back", None)
        if back:
            marks[i]["back"] = back
    assert any('"+"' in json.dumps(m) or "messages" in m.get("back", {}) for m in marks)
    assert not any('"~"' in json.dumps(m) for m in marks)
    old = InMemoryAgentSession.restore(json.dumps(data))
    assert old.history == s.history
    assert [_typed(x) for x in old._history.states()] == [_typed(x) for x in states]
    # and it goes on: new checkpoints on top of old ones
    build_ops_agent().prompt("delete user 1001 again").session(old).call()
    again = InMemoryAgentSession.restore(old.to_json())
    assert len(again.history) == len(states) + 1
    assert [_typed(x) for x in again._history.states()[: len(states)]] == [
        _typed(x) for x in states
    ]
