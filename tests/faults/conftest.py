"""The fault-injection suite prints its totals at the end of the run: how many trials ran,
how many effects were counted against how many should have run, and how many decisions
were lost (always 0)."""

from __future__ import annotations

from typing import Any

from tests.faults._helpers import TOTALS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TOTALS["trials"]:
        return
    terminalreporter.write_sep("-", "fault injection totals")
    terminalreporter.write_line(
        f"trials {TOTALS['trials']} · effects counted {TOTALS['effects']} "
        f"(expected {TOTALS['expected']}) · decisions lost {TOTALS['lost']} · "
        f"refusals {TOTALS['refused']}"
    )
    for name, (trials, effects, expected, lost, refused) in sorted(TOTALS["by_test"].items()):
        terminalreporter.write_line(
            f"  {name}: {trials} trials, {effects}/{expected} effects, {lost} decisions "
            f"lost, {refused} refused"
        )
