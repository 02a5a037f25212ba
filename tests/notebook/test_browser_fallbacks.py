"""Where a browser differs (issue 23): graphviz cannot start `dot` there and raises
OSError (Errno 138, no processes) instead of ExecutableNotFound; the fallback must catch it
and say what fits where it runs. The browser itself: tests/browser/test_tutorials_in_lite.py."""

from __future__ import annotations

from typing import Any

import pytest
from tests.notebook.test_render import paused

from intermission.notebook import graph_view
from intermission.notebook.graph_view import NO_DOT_HINT, GraphView, svg_of


def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    import graphviz

    def pipe(*_a: Any, **_k: Any) -> str:
        raise OSError(138, "emscripten does not support processes.")

    monkeypatch.setattr(graphviz.Source, "pipe", pipe)


def test_a_dot_that_cannot_start_is_a_missing_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    no_processes(monkeypatch)
    assert svg_of("digraph { a -> b }") is None
    team, s = paused()
    bundle = GraphView(team, s)._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert bundle["text/plain"].startswith(NO_DOT_HINT)
    assert bundle["text/vnd.mermaid"].startswith("flowchart LR")


def test_the_hint_fits_where_it_runs() -> None:
    assert "apt-get install graphviz" in graph_view._DESKTOP_HINT
    assert "apt-get" not in graph_view._BROWSER_HINT and "browser" in graph_view._BROWSER_HINT
    assert NO_DOT_HINT is graph_view._DESKTOP_HINT  # CPython; the browser test checks the other


def test_viz_js_lays_graphs_out_for_the_font_the_browser_draws_them_with() -> None:
    """viz.js measures labels with its own font tables; laid out for Helvetica, a browser
    drawing them in DejaVu Sans lets them stick out of their boxes (issue 29). The browser
    path lays every label out for DejaVu Sans and asks for it first (the fit itself is
    measured in a real browser: tests/browser/test_tutorials_in_lite.py)."""
    from intermission.notebook import _viz_js

    team, s = paused()
    dot = GraphView(team, s).dot()
    laid_out = _viz_js.for_browser(dot)
    assert 'fontname="Helvetica"' in dot and "Helvetica" not in laid_out  # every label, legend too
    assert laid_out.count('fontname="DejaVu Sans"') == dot.count('fontname="Helvetica"') >= 2
    drawn = _viz_js.drawn_as_laid_out('<text font-family="DejaVu Sans" font-size="14.00">x</text>')
    assert 'font-family="DejaVu Sans,Verdana,Helvetica,Arial,sans-serif"' in drawn
