"""The public surface: a sorted ``__all__`` of documented names (STYLE §5)."""

from __future__ import annotations

import inspect

import intermission


def test_all_is_sorted_and_complete() -> None:
    names = intermission.__all__
    constants = ["END", "START"]
    assert names[:2] == constants and names[2:] == sorted(names[2:])
    public = {
        n
        for n, v in vars(intermission).items()
        if not n.startswith("_") and not inspect.ismodule(v)
    }
    assert public - {"annotations", "TYPE_CHECKING"} <= set(names) | {"__version__"}
    # the lazy surface resolves every name, and dir() lists them
    assert set(names) <= set(dir(intermission))
    for name in names:
        assert hasattr(intermission, name), name


def test_every_public_name_has_a_docstring() -> None:
    for name in intermission.__all__:
        obj = getattr(intermission, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_misuse_raises_the_package_s_typed_errors_not_bare_builtins() -> None:
    import pytest

    from intermission import (
        HITLInterceptor,
        InMemoryAgentSession,
        IntermissionError,
        ReActAgent,
        RequestInProgressError,
        ScriptedModel,
        UsageError,
    )
    from intermission.examples import build_change_graph
    from intermission.notebook import ApprovalWidget, GraphView, Inbox
    from intermission.stores import MemoryStore

    solo = ReActAgent.of(ScriptedModel(["hi"])).name("solo").build()
    with pytest.raises(UsageError, match="cannot draw a ReActAgent") as drawn:
        GraphView(solo)
    with pytest.raises(UsageError, match=r"on_tool\(...\) before approvers") as ordered:
        HITLInterceptor().approvers({"lead"})
    assert isinstance(drawn.value, TypeError) and isinstance(ordered.value, ValueError)

    team, store = build_change_graph(), MemoryStore()
    s = InMemoryAgentSession.of("change-001")
    team.prompt("Upgrade").session(s).call()
    store.save(s)
    with pytest.raises(UsageError, match="no agent named 'change'"):
        Inbox(store, {}).open_session("change-001")

    widget = ApprovalWidget(team, s)
    assert widget.runner._begin()  # a click's resume is running
    with pytest.raises(RequestInProgressError) as busy:
        widget.approve(reviewer="alice")
    assert isinstance(busy.value, IntermissionError) and s.context.get("approval.decision") is None


def _misuses() -> dict[str, tuple[type[BaseException], object]]:
    from intermission import (
        FlowEngine,
        GraphSpec,
        HITLDecision,
        InMemoryAgentSession,
        InvalidDecisionError,
        ReActAgent,
        ScriptedModel,
        StoreError,
        ToolDefinitionError,
        UsageError,
        tool,
    )
    from intermission.stores import PostgresStore, SQLiteStore

    agent = ReActAgent.of(ScriptedModel(["hi"])).name("a").build()
    return {
        "edited args not a dict": (
            InvalidDecisionError, lambda: HITLDecision.approve().modified_args("x")),
        "a script that is one string": (UsageError, lambda: ScriptedModel("hello")),
        "a script that is a number": (UsageError, lambda: ScriptedModel(3)),
        "a lambda as a tool": (ToolDefinitionError, lambda: tool(lambda x: x)),
        "a session id that is not a string": (UsageError, lambda: InMemoryAgentSession.of(7)),
        "an id where a session goes": (UsageError, lambda: agent.prompt("x").session("s-1")),
        "no model": (UsageError, lambda: ReActAgent.of(None)),
        "a dict where a context goes": (UsageError, lambda: FlowEngine().eval(GraphSpec("g"), {})),
        "a store in a missing folder": (StoreError, lambda: SQLiteStore("/no/such/dir/x.db")),
        "no PostgreSQL server there": (
            StoreError, lambda: PostgresStore("postgresql://nobody:pw@127.0.0.1:1/x")),
    }  # fmt: skip


def test_every_misuse_gets_a_typed_error_that_says_what_to_do() -> None:
    import pytest

    from intermission import IntermissionError

    for name, (error, call) in _misuses().items():
        with pytest.raises(error) as caught:
            call()  # type: ignore[operator]
        assert isinstance(caught.value, IntermissionError), name
        assert len(str(caught.value)) > 30, name  # a sentence, not a bare value
