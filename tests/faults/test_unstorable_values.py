"""Issue 13.3 / R40: a value the store cannot encode never strands a resume.

Before: a ``datetime`` in the context, a tool result with a lone surrogate or a NUL on
PostgreSQL raised a bare driver or encoding error from the final save of ``store.resume()``,
the claim stayed for the whole lease and each retry needed a new approval. Now such a value
is refused with a typed error when it enters the session (or at the latest before the save
writes anything), the claim is released at once, and the decision saved before is kept; or
it is stored faithfully, escaped, the same on all three stores.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.faults._helpers import EFFECT_KEY, approved_effect_session, lines, tally

from intermission import (
    FlowContext,
    FlowEngine,
    GraphSpec,
    InMemoryAgentSession,
    IntermissionError,
    NotSerializableError,
    UsageError,
)
from intermission.testing.workers import append_effect, effect_graph

FSNAME = os.fsdecode(b"report-\xff.csv")  # a file name that is not UTF-8: a lone surrogate


def _graph(effect: Callable[[str], Any], after: Callable[[FlowContext], None]) -> GraphSpec:
    return effect_graph(effect, after=after)


def _resume(store: Any, spec: GraphSpec) -> None:
    with store.resume("u") as s:
        FlowEngine().eval(spec, s.context)


def _nothing(ctx: FlowContext) -> None:
    return None


BAD_STEPS: dict[str, Callable[[FlowContext], None]] = {
    # refused when it enters the session
    "datetime put": lambda ctx: ctx.put("when", dt.datetime.now(dt.timezone.utc)),
    "infinity put": lambda ctx: ctx.put("score", float("inf")),
    "bytes set": lambda ctx: ctx.__setitem__("raw", b"\x00\x01"),
    # changed in place after it entered: refused when the final save encodes it
    "datetime appended": lambda ctx: ctx.get("log").append(dt.datetime.now(dt.timezone.utc)),
}


@pytest.mark.parametrize("step", list(BAD_STEPS))
def test_an_unstorable_value_releases_the_claim_and_the_next_resume_succeeds_at_once(
    step: str, make_store: Any, tmp_path: Path
) -> None:
    store = make_store()  # the default lease: a claim left behind would hold for 5 minutes
    approved_effect_session(store, "u")
    s = store.load("u")
    s.context.put("log", [])
    store.save(s)
    effect_file = tmp_path / "effect.log"
    effect = append_effect(str(effect_file))
    with pytest.raises(NotSerializableError) as info:
        _resume(store, _graph(effect, BAD_STEPS[step]))
    assert isinstance(info.value, IntermissionError)  # typed, not a driver error
    kept = store.load("u")
    assert kept.context["approval.decision"] == "APPROVE" and kept.status == "pending"
    assert kept.ledger[EFFECT_KEY].status == "completed"  # the effect that ran is recorded
    _resume(store, _graph(effect, _nothing))  # at once: no SessionBusyError
    done = store.load("u")
    assert done.status == "done" and lines(effect_file) == 1
    assert done.context["change.result"] == "applied change-001"
    tally(f"unstorable value: {step}", trials=1, effects=lines(effect_file), expected=1)


def test_an_effect_result_that_is_not_json_is_recorded_as_done_and_never_rerun(
    make_store: Any, tmp_path: Path
) -> None:
    store = make_store()
    approved_effect_session(store, "u")
    ran: list[str] = []

    def effect(change_id: str) -> Any:
        ran.append(change_id)
        return {"applied", change_id}  # a set: not JSON

    with pytest.raises(NotSerializableError, match="result of effect"):
        _resume(store, _graph(effect, _nothing))
    entry = store.load("u").ledger[EFFECT_KEY]
    assert entry.status == "completed" and entry.result is None and "not JSON" in str(entry.error)
    _resume(store, _graph(effect, _nothing))
    assert ran == ["change-001"] and store.load("u").status == "done"
    tally("effect result not JSON", trials=1, effects=len(ran), expected=1)


def test_lone_surrogates_and_nuls_are_stored_faithfully_the_same_on_every_store(
    make_store: Any, tmp_path: Path
) -> None:
    store = make_store()
    approved_effect_session(store, "u")
    weird = f"{FSNAME} \x00 tab\t"

    def effect(change_id: str) -> str:
        return f"wrote {FSNAME}"

    def after(ctx: FlowContext) -> None:
        ctx.put("files", [FSNAME, "nul\x00inside"])
        assert ctx.session is not None
        ctx.session.pending(True, f"check {weird}")  # a reason from tool output

    _resume(store, _graph(effect, after))
    back = store.load("u")
    assert back.context["files"] == [FSNAME, "nul\x00inside"]
    assert back.context["change.result"] == f"wrote {FSNAME}"
    assert back.ledger[EFFECT_KEY].result == f"wrote {FSNAME}"
    assert back.pending_reason == f"check {weird}"  # the snapshot keeps the exact text
    assert back.to_json() == InMemoryAgentSession.restore(back.to_json()).to_json()
    (listed,) = store.pending()
    # a listing column cannot hold a NUL (PostgreSQL) or a surrogate (any driver): it shows
    # them escaped, the same text on every store
    assert listed.reason == "check report-\\udcff.csv \\u0000 tab\t"
    tally("lone surrogate and NUL stored", trials=1, effects=0, expected=0)


@pytest.mark.parametrize("bad", ["nul\x00id", "sur" + FSNAME, ""])
def test_ids_no_store_can_key_are_refused_up_front(bad: str, make_store: Any) -> None:
    store = make_store()
    with pytest.raises(UsageError):
        InMemoryAgentSession.of(bad)
    s = InMemoryAgentSession.of("keys")
    with pytest.raises(UsageError):
        s.once(bad, lambda: "never")
    store.save(s)
    assert store.load("keys").ledger == {}
