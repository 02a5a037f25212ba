"""A lone surrogate (``"\\ud800"``: not Unicode text, e.g. an ``os.fsdecode`` file name)
may sit in a session's values, where every store keeps it escaped and gives it back
unchanged, but never in a key, which pydantic cannot write back: a snapshot holding one
anywhere (a tool argument's name, deep inside a task's arguments) is refused at the load
with SnapshotSchemaError, so a loaded session is always savable again."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tests._helpers import json_paths

from intermission import (
    HITL,
    ChatMessage,
    HITLDecision,
    InMemoryAgentSession,
    SnapshotSchemaError,
)
from intermission.examples import build_ops_agent

OPS = build_ops_agent()
LONE = "x\ud800y"


def _ops_session() -> InMemoryAgentSession:
    s = InMemoryAgentSession.of("ops-1")
    OPS.prompt("delete user 1001").session(s).call()
    return s


OPS_JSON = _ops_session().to_json()
PATHS = [p for p in json_paths(json.loads(OPS_JSON))[1:] if p[-1] == "args"]


def _planted(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = json.loads(OPS_JSON)
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return doc


@pytest.mark.parametrize("form", ["json", "dict"])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: ".".join(map(str, p)))
@pytest.mark.parametrize("bad", [{"\ud800": 1}, {"a": {"\ud800": None}}, [{"k\udcff": 1}]])
def test_a_key_with_a_lone_surrogate_anywhere_is_refused_at_the_load(
    form: str, path: tuple[Any, ...], bad: Any
) -> None:
    # found by hypothesis (test_entry_points, json-ops): hitl.tasks.0.args = {"a": {"\ud800":
    # None}} was accepted, and the session then crashed saving with UnicodeEncodeError
    doc = _planted(path, bad)
    data: Any = json.dumps(doc) if form == "json" else doc
    with pytest.raises(SnapshotSchemaError, match="lone surrogate"):
        InMemoryAgentSession.restore(data)


def test_an_escaped_backslash_u_is_plain_text_and_loads() -> None:
    doc = _planted(PATHS[0], {"a": {"\\ud800 is six characters": 1}})
    s = InMemoryAgentSession.restore(json.dumps(doc))
    assert InMemoryAgentSession.restore(s.to_json()).to_json() == s.to_json()


ENTRIES: dict[str, Callable[[InMemoryAgentSession], Any]] = {
    "prompt": lambda s: OPS.prompt(LONE).session(s).call(),
    "comment": lambda s: HITL.submit(
        s, HITL.pending_tasks(s)[0], HITLDecision("approve", comment=LONE)),
    "reason": lambda s: HITL.reject_all(s, LONE),
    "context value": lambda s: s.context.put("k", {"deep": [LONE]}),
    "message": lambda s: s.add_message(ChatMessage(role="user", content=LONE)),
    "pending reason": lambda s: s.pending(True, LONE),
}  # fmt: skip


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_lone_surrogates_in_values_are_kept_by_every_store(
    entry: str, make_store: Callable[..., Any]
) -> None:
    s = _ops_session()
    ENTRIES[entry](s)
    saved = s.to_json()
    store = make_store()
    try:
        store.save(s)
        loaded = store.load("ops-1")
        assert loaded.to_json() == saved  # the same text: the surrogate came back unchanged
    finally:
        store.close()


@pytest.mark.parametrize(
    "entry",
    [
        lambda s: s.context.put("\ud800", 1),
        lambda s: s.context.put("k", {"a": {"\ud800": 1}}),
        lambda s: HITL.approve_all(s, reviewer="ann\ud800"),
    ],
    ids=["context key", "context nested key", "principal name"],
)
def test_keys_and_names_with_lone_surrogates_are_refused_with_nothing_stored(
    entry: Callable[[InMemoryAgentSession], Any],
) -> None:
    from intermission import IntermissionError

    s = _ops_session()
    before = s.to_json()
    with pytest.raises(IntermissionError):
        entry(s)
    assert s.to_json() == before
