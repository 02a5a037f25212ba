"""Issue 27, case 10: a decision needs no agent in hand. What validating edited arguments
needs — the tool's JSON argument schema — travels with the task when the call is
proposed, so ``HITL.submit(session, task, HITLDecision.approve().modified_args({...}))``
works on a restored, loaded or forked session, in any process, without ``agent=``.
Before, it raised "no tool … is at hand; pass the agent". A callable approver policy
still fails closed without its agent."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from tests._helpers import TRANSFERS, transfer

from intermission import (
    END,
    HITL,
    GraphSpec,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    InvalidDecisionError,
    ReActAgent,
    ReviewerNotAllowedError,
    ScriptedModel,
    TeamAgent,
    ToolCall,
    tool,
)
from intermission._schema import SchemaMismatch, conform
from intermission.agents.tools import ToolArgumentError
from intermission.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]


def teller(approvers: Any = None) -> Any:
    """A member that moves money once a human approves (the Java suite's transfer)."""

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return (
            f"Done: {seen[-1]}"
            if seen
            else [ToolCall("transfer", {"account": "bob", "amount": 500})]
        )

    hitl = HITLInterceptor().on_tool("transfer")
    if approvers is not None:
        hitl = hitl.approvers(approvers)
    return (ReActAgent.of(ScriptedModel(script)).name("teller").tools(transfer)
            .interceptor(hitl).build())  # fmt: skip


def bank_team() -> Any:
    spec = GraphSpec("bank")
    spec.add_start().link_add("teller")
    spec.add_agent(teller()).link_add(END)
    spec.add_end()
    return TeamAgent.of().name("bank").graph(spec).build()


def test_a_fork_approves_edited_arguments_without_the_agent() -> None:
    TRANSFERS.clear()
    agent = teller()
    s = InMemoryAgentSession.of("what-if")
    agent.prompt("pay bob").session(s).call()
    (task,) = HITL.pending_tasks(s)
    assert task.args_schema == transfer.parameters  # the schema travelled with the task
    small, refused = s.fork("what-if.small"), s.fork("what-if.refused")
    before = small.to_json()
    with pytest.raises(InvalidDecisionError, match="amount") as caught:
        HITL.submit(small, task, HITLDecision.approve().modified_args({"amount": "lots"}))
    assert "no tool" not in str(caught.value) and small.to_json() == before
    with pytest.raises(InvalidDecisionError, match="not an argument"):
        HITL.submit(small, task, HITLDecision.approve().modified_args({"memo": "x"}))
    assert small.to_json() == before
    record = HITL.submit(small, task, HITLDecision.approve().modified_args({"amount": "50"}))
    assert record.modified_args == {"amount": 50}  # taken as the tool takes it
    HITL.submit(refused, task, HITLDecision.reject("no"))
    agent.prompt().session(small).call()
    agent.prompt().session(refused).call()
    assert TRANSFERS == [("bob", 50)]


def test_a_team_member_s_tool_call_is_edited_on_a_restored_session() -> None:
    TRANSFERS.clear()
    team = bank_team()
    s = InMemoryAgentSession.of("team-transfer")
    team.prompt("pay bob").session(s).call()
    restored = InMemoryAgentSession.restore(s.to_json())  # no agent anywhere in it
    (task,) = HITL.pending_tasks(restored)
    assert task.agent == "teller"
    HITL.submit(restored, task, HITLDecision.approve().modified_args({"amount": 50}))
    response = team.prompt().session(restored).call()
    assert response.content == "Done: sent 50 to bob" and TRANSFERS == [("bob", 50)]


EDIT_IN_ANOTHER_PROCESS = """
import sys
from intermission import HITL, HITLDecision, InvalidDecisionError
from intermission.stores import SQLiteStore
store = SQLiteStore(sys.argv[1])
s = store.load("loaded")
(task,) = HITL.pending_tasks(s)
try:
    HITL.submit(s, task, HITLDecision.approve().modified_args({"amount": sys.argv[2]}))
except InvalidDecisionError as exc:
    print("refused:", exc)
    sys.exit(3)
store.save(s)
print("recorded")
"""


def test_a_loaded_session_is_decided_in_another_process(tmp_path: Path) -> None:
    TRANSFERS.clear()
    path = str(tmp_path / "bank.sqlite")
    store = SQLiteStore(path)
    team = bank_team()
    s = InMemoryAgentSession.of("loaded")
    team.prompt("pay bob").session(s).call()
    store.save(s)
    row = store.raw_row("loaded")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def decide(amount: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", EDIT_IN_ANOTHER_PROCESS, path, amount],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip

    bad = decide("lots")
    assert bad.returncode == 3 and "amount" in bad.stdout, bad.stderr
    assert store.raw_row("loaded") == row  # nothing changed
    good = decide("75")
    assert good.returncode == 0 and good.stdout.strip() == "recorded", good.stderr
    with store.resume("loaded") as s:
        team.prompt().session(s).call()
    assert TRANSFERS == [("bob", 75)] and store.load("loaded").status == "done"
    store.close()


def _only_lead(reviewer: str | None, task: Any) -> bool:
    return reviewer == "lead"


def test_a_callable_approver_policy_still_fails_closed_without_its_agent() -> None:
    agent = teller(approvers=_only_lead)
    s = InMemoryAgentSession.of("policy")
    agent.prompt("pay bob").session(s).call()
    restored = InMemoryAgentSession.restore(s.to_json())
    (task,) = HITL.pending_tasks(restored)
    before = restored.to_json()
    edit = HITLDecision.approve().modified_args({"amount": 5}).reviewer("lead")
    with pytest.raises(ReviewerNotAllowedError, match="not at hand"):
        HITL.submit(restored, task, edit)
    assert restored.to_json() == before
    assert HITL.submit(restored, task, edit, agent=agent).modified_args == {"amount": 5}


def test_a_task_from_before_schemas_travelled_needs_its_tool() -> None:
    agent = teller()
    s = InMemoryAgentSession.of("old")
    agent.prompt("pay bob").session(s).call()
    data = json.loads(s.to_json())
    for t in data["hitl"]["tasks"]:
        del t["args_schema"]  # as written before the field
    old = InMemoryAgentSession.restore(json.dumps(data))
    (task,) = HITL.pending_tasks(old)
    assert task.args_schema is None
    with pytest.raises(InvalidDecisionError, match="is at hand"):
        HITL.submit(old, task, HITLDecision.approve().modified_args({"amount": 5}))
    assert HITL.submit(
        old, task, HITLDecision.approve().modified_args({"amount": "5"}), agent=agent
    ).modified_args == {"amount": 5}


# -- the schema check agrees with the tool ------------------------------------------------
@tool
def everything(
    n: int,
    word: str,
    ratio: float = 0.5,
    flag: bool = False,
    ids: list[int] | None = None,
    maybe: int | None = None,
    mode: Literal["fast", "safe"] = "safe",
    level: Annotated[int, Field(ge=0, le=10)] = 0,
    name: Annotated[str, Field(min_length=2, max_length=5)] = "ab",
) -> str:
    """A tool with arguments of every common kind."""
    return "ok"


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20, 20),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["", "a", "ab", "abcdef", "fast", "safe", "5", " 7 ", "3.0", "3.5", "x"]),
    # digits Python reads and pydantic does not, more digits than either reads, an
    # integer no float holds
    st.sampled_from(["\uff15", "\u0661\u0662", "9" * 5000, "1" * 400, 10**400, -(10**309)]),
    # numbers that are not finite, given or read from text: no tool takes them
    st.sampled_from([math.inf, -math.inf, math.nan, "inf", "-Infinity", "nan", "1e999", "9" * 999]),
    st.lists(st.one_of(st.integers(-5, 5), st.sampled_from(["1", "a"])), max_size=3),
)
KEYS = ["n", "word", "ratio", "flag", "ids", "maybe", "mode", "level", "name", "unknown"]


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.sampled_from(KEYS), JSON_VALUES, max_size=6))
@example(args={"ratio": "9" * 1000})  # (found once on a fresh clone: the tool took it as inf)
@example(args={"ratio": math.inf})
@example(args={"ids": [1, math.nan]})
@example(args={"unknown": -math.inf})
def test_what_the_schema_accepts_the_tool_runs_with_the_same_values(args: dict[str, Any]) -> None:
    """Soundness for every input: arguments the task's schema accepts are accepted by the
    tool itself, as the same values. Completeness where pydantic does not turn a bool
    into a number: what the tool accepts, the schema accepts."""
    args = {"n": 1, "word": "w", **args}  # (mostly the edits of a valid call)
    schema = json.loads(json.dumps(everything.parameters))  # (as a stored task holds it)
    try:
        fitted = conform(args, schema)
    except SchemaMismatch:
        fitted = None
    try:
        validated = everything.validate(args)
    except ToolArgumentError:
        validated = None
    if fitted is not None:
        assert validated is not None, (args, fitted)
        assert all(validated[k] == v and type(validated[k]) is type(v) for k, v in fitted.items())
    numeric = {"n", "ratio", "ids", "maybe", "level"}
    bool_as_number = any(
        isinstance(v, bool) or (isinstance(v, list) and any(isinstance(x, bool) for x in v))
        for k, v in args.items()
        if k in numeric
    )
    if validated is not None and not bool_as_number:
        assert fitted is not None, (args, validated)


@pytest.mark.parametrize(
    ("edit", "says"),
    [({"amount": "9" * 5000}, "amount: must be integer"),
     ({"amount": "\uff15"}, "amount: must be integer")],
)  # fmt: skip
def test_an_edit_no_tool_reads_is_a_typed_refusal_and_changes_nothing(
    edit: dict[str, Any], says: str
) -> None:
    """Before: an integer argument edited to a string of 5,000 digits raised a bare
    ValueError out of ``HITL.submit`` (over AG-UI: ``INTERNAL_ERROR`` and a traceback in
    the server's log), and a fullwidth "５" was recorded as 5, which the tool itself
    refuses."""
    s = InMemoryAgentSession.of("edit")
    teller().prompt("pay bob").session(s).call()
    (task,) = HITL.pending_tasks(s)
    before = s.to_json()
    with pytest.raises(InvalidDecisionError, match=says):
        HITL.submit(s, task, HITLDecision.approve().modified_args(edit))
    assert s.to_json() == before


# -- non-finite numbers never reach a tool ---------------------------------------------------
SCALED: list[float] = []
"""Every call of :func:`scale` (tests clear it first)."""


@tool
def scale(ratio: float) -> str:
    """Scale the fleet by a ratio."""
    SCALED.append(ratio)
    return f"scaled by {ratio}"


def scaler(ratio: Any) -> Any:
    """An agent whose model asks to scale by ``ratio``, behind an approval."""

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}" if seen else [ToolCall("scale", {"ratio": ratio})]

    return (ReActAgent.of(ScriptedModel(script)).name("scaler").tools(scale)
            .interceptor(HITLInterceptor().on_tool("scale")).build())  # fmt: skip


NON_FINITE_TEXT = ["9" * 1000, "1e999", "-inf", "NaN", "Infinity"]
NON_FINITE = [math.inf, -math.inf, math.nan, 10**400, *NON_FINITE_TEXT]


@pytest.mark.parametrize("ratio", NON_FINITE, ids=lambda v: repr(v)[:8])
def test_an_edit_to_a_non_finite_number_is_a_typed_refusal_and_changes_nothing(ratio: Any) -> None:
    """Before: the tool's own validation took "9" * 1000 (and "inf", "nan", "1e999") for a
    float argument as inf, while the stored schema refused it: the two disagreed. Now both
    refuse, saying why."""
    SCALED.clear()
    s = InMemoryAgentSession.of("scale-edit")
    scaler(2.0).prompt("scale up").session(s).call()
    (task,) = HITL.pending_tasks(s)
    before = s.to_json()
    with pytest.raises(InvalidDecisionError, match=r"ratio.*(finite number|not finite)"):
        HITL.submit(s, task, HITLDecision.approve().modified_args({"ratio": ratio}))
    assert s.to_json() == before and SCALED == []
    with pytest.raises(ToolArgumentError, match=r"ratio: .*(finite|valid) number"):
        scale.validate({"ratio": ratio})


@pytest.mark.parametrize("ratio", NON_FINITE_TEXT, ids=lambda v: repr(v)[:8])
def test_a_model_s_non_finite_argument_never_runs_the_tool(ratio: str) -> None:
    """An approved call whose arguments read as a non-finite number reaches the tool's own
    validation and becomes an observation; the tool never runs. (Before: it ran with inf or
    nan. A float that is not finite cannot even make a ToolCall: it is not JSON.)"""
    SCALED.clear()
    agent = scaler(ratio)
    s = InMemoryAgentSession.of("scale-model")
    agent.prompt("scale up").session(s).call()
    (task,) = HITL.pending_tasks(s)
    HITL.submit(s, task, HITLDecision.approve())
    response = agent.prompt().session(s).call()
    assert "finite number" in response.content and SCALED == [], response.content


class Box(BaseModel):
    """A model argument: it keeps its own config (pydantic's default takes "inf")."""

    size: float


@tool
def untyped(
    options: Any, nested: dict[str, list[float]] | None = None, box: Box | None = None
) -> str:
    """Arguments pydantic passes through as given, or converts in a model of their own."""
    return "ok"


@pytest.mark.parametrize(
    "args",
    [{"options": math.inf},
     {"options": {"a": [1, math.nan]}},
     {"options": 1, "nested": {"k": [1.0, "inf"]}},
     {"options": 1, "box": {"size": "1e999"}},
     {"options": 1, "box": {"size": "-inf"}}],
    ids=["any", "any-nested", "typed-nested", "model-overflow", "model-text"],
)  # fmt: skip
def test_a_non_finite_number_anywhere_in_the_arguments_is_refused_by_both(args: Any) -> None:
    """An untyped argument keeps what it is given, and a model argument converts text by
    its own config: a number that is not finite, deep inside, is refused by the tool's
    validation and the schema check alike."""
    with pytest.raises(ToolArgumentError, match="finite number"):
        untyped.validate(args)
    assert untyped.validate({"options": 1, "box": {"size": "2.5"}})["box"] == Box(size=2.5)
    with pytest.raises(SchemaMismatch, match="finite number"):
        conform(args, json.loads(json.dumps(untyped.parameters)))
