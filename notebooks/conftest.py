"""How the tutorials run as tests: plain ``pytest --nbval notebooks/`` (nbval's usual way)
needs no environment variable and no extra flag.

- The code twins decide in place of a person (``INTERMISSION_AUTOPILOT=1``, inherited by
  every kernel nbval starts), so every cell after a widget runs its checks.
- Outputs are compared after ``sanitize.cfg`` (ids, times, addresses) in a kernel of this
  environment (``--nbval-current-env``).
- Stored outputs are what a person sees *before* deciding (``make notebooks``): cells whose
  output depends on the decision carry the ``nbval-ignore-output`` tag, so nbval runs them
  without comparing; the check cell of each page (``# what this page taught``) must then
  print exactly ``ok`` — its asserts ran on the decided session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
os.environ["INTERMISSION_AUTOPILOT"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    """Sanitize with sanitize.cfg and use this environment's kernel, unless told otherwise."""
    option = config.option
    if getattr(option, "nbval_sanitize_with", "absent") is None:
        option.nbval_sanitize_with = str(HERE / "sanitize.cfg")
    if getattr(option, "nbval_kernel_name", None) is None and hasattr(option, "nbval_current_env"):
        option.nbval_current_env = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[Any]:
    """A page's check cell passes only when it printed ``ok``."""
    yield
    cell = getattr(item, "cell", None)
    if cell is None or not str(cell.source).lstrip().startswith("# what this page taught"):
        return
    printed = "".join(
        out.get("text", "") for out in (getattr(item, "test_outputs", None) or [])
        if out.get("output_type") == "stream" and out.get("name") == "stdout"
    )
    if printed.strip() != "ok":
        raise AssertionError(f"{item.name}: the page's checks printed {printed!r}, not 'ok'")
