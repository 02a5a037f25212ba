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
