"""``%load_ext intermission.notebook`` (R38); core types carry no ``_repr_*``."""

from __future__ import annotations

import pytest

import intermission
from intermission import InMemoryAgentSession
from intermission.examples import build_change_graph


def test_core_types_have_no_repr_methods() -> None:
    for name in intermission.__all__:
        obj = getattr(intermission, name)
        if isinstance(obj, type):
            assert not any(a.startswith("_repr_") for a in vars(obj)), name


def test_load_ext_registers_rich_display() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    try:
        ip.run_line_magic("load_ext", "intermission.notebook")
        team = build_change_graph()
        s = InMemoryAgentSession.of("c")
        resp = team.prompt("Upgrade").session(s).call()
        data, _ = ip.display_formatter.format(team.spec)
        assert "image/svg+xml" in data and "text/vnd.mermaid" not in data  # one look (R33)
        data, _ = ip.display_formatter.format(s)
        assert "pending: Change plan awaits human review" in data["text/html"]
        data, _ = ip.display_formatter.format(resp)
        assert "pending" in data["text/html"]
        data, _ = ip.display_formatter.format(s.events)
        assert "im-timeline" in data["text/html"]
        ip.run_line_magic("unload_ext", "intermission.notebook")
        data, _ = ip.display_formatter.format(s)
        assert "text/html" not in data
    finally:
        InteractiveShell.clear_instance()


def test_missing_extra_is_an_actionable_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from intermission import MissingDependencyError
    from intermission._compat import require

    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(MissingDependencyError, match=r"intermission\[notebook\]"):
        require("graphviz", "notebook", "also needs the `dot` program")
