"""Issue 29: a stored widget read without a live kernel. A fresh clone opens its notebooks
untrusted, and JupyterLab then shows a widget output's ``text/plain`` (the widget's
renderer is not a safe one); GitHub and nbviewer show it too. That text says what the
output is and how to get the live widget, not only a Python repr like ``<HITLPanel …>``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.notebook.test_render import paused

from intermission.notebook import ApprovalWidget
from intermission.notebook._widget import NOT_LIVE

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
VIEW = "application/vnd.jupyter.widget-view+json"


def test_a_widget_says_in_text_that_it_needs_a_live_kernel() -> None:
    team, session = paused()
    data, _ = ApprovalWidget(team, session)._repr_mimebundle_()
    first, note = data["text/plain"].split("\n")
    assert first.startswith("<ApprovalWidget ") and note == NOT_LIVE
    assert "run this cell" in NOT_LIVE


def test_every_stored_widget_output_says_how_to_get_the_live_widget() -> None:
    seen = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if VIEW in data:
                    text = data.get("text/plain", "")
                    text = "".join(text) if isinstance(text, list) else text
                    assert NOT_LIVE in text, f"{path.name}: {text!r}"
                    seen.append(path.name)
    assert len(set(seen)) >= 8, seen  # 01, 04, 05, 06, 08, 09, 10, 11 show widgets
