"""The README's code examples run as written."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

from tests._helpers import need_module


def _blocks() -> list[str]:
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_quickstart_runs() -> None:
    code = _blocks()[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().strip() == "User 1001 deleted."


def test_readme_marimo_example_runs() -> None:
    need_module("marimo", "marimo (pip install marimo)")
    (code,) = [b for b in _blocks() if "mo.ui.anywidget" in b]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().strip() == "pending None"  # nobody decided yet
