"""The README's code example runs as written."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re


def test_readme_quickstart_runs() -> None:
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().strip() == "User 1001 deleted."
