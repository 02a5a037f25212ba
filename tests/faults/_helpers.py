"""Shared pieces of the fault-injection suite: a world of one approved, ledgered change and
the running totals printed at the end of the run (by tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from intermission import FlowEngine, InMemoryAgentSession, NothingToResumeError
from intermission.testing.workers import EFFECT_KEY, append_effect, effect_graph

TOTALS: dict[str, Any] = {
    "trials": 0, "effects": 0, "expected": 0, "lost": 0, "refused": 0, "by_test": {},
}  # fmt: skip


def tally(
    test: str, *, trials: int, effects: int, expected: int, lost: int = 0, refused: int = 0
) -> None:
    """Add one test's figures to the totals."""
    for key, value in (
        ("trials", trials), ("effects", effects), ("expected", expected), ("lost", lost),
        ("refused", refused),
    ):  # fmt: skip
        TOTALS[key] += value
    mine = TOTALS["by_test"].setdefault(test, [0, 0, 0, 0, 0])
    for i, value in enumerate((trials, effects, expected, lost, refused)):
        mine[i] += value


def add_totals(other: dict[str, Any]) -> None:
    """Add another process's totals (a worker's, under ``pytest -n``) to these."""
    for key in ("trials", "effects", "expected", "lost", "refused"):
        TOTALS[key] += other[key]
    for test, figures in other["by_test"].items():
        mine = TOTALS["by_test"].setdefault(test, [0, 0, 0, 0, 0])
        for i, value in enumerate(figures):
            mine[i] += value


def write_totals(reporter: Any) -> None:
    """Print the totals (if any trial ran): how many trials ran, how many effects were counted
    against how many should have run, and how many decisions were lost (always 0)."""
    if not TOTALS["trials"]:
        return
    reporter.write_sep("-", "fault injection totals")
    reporter.write_line(
        f"trials {TOTALS['trials']} · effects counted {TOTALS['effects']} "
        f"(expected {TOTALS['expected']}) · decisions lost {TOTALS['lost']} · "
        f"refusals {TOTALS['refused']}"
    )
    for name, (trials, effects, expected, lost, refused) in sorted(TOTALS["by_test"].items()):
        reporter.write_line(
            f"  {name}: {trials} trials, {effects}/{expected} effects, {lost} decisions "
            f"lost, {refused} refused"
        )


def lines(path: Path) -> int:
    """How many times the effect writing to ``path`` ran."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def approved_effect_session(store: Any, sid: str) -> None:
    """Save a session of :func:`effect_graph` paused at its gate, with APPROVE decided."""
    s = InMemoryAgentSession.of(sid)
    FlowEngine().eval(effect_graph(lambda change_id: "unused"), s.context)
    assert s.is_pending
    s.context.put("approval.decision", "APPROVE")
    s.context.put("approval.operator", "alice")
    store.save(s)


def resume_effect_in_process(store: Any, sid: str, effect_file: Path) -> str:
    """Resume the effect graph here; returns "ran" or the typed error's name."""
    try:
        with store.resume(sid) as s:
            FlowEngine().eval(effect_graph(append_effect(str(effect_file))), s.context)
    except NothingToResumeError:
        return "NothingToResumeError"
    return "ran"


__all__ = [
    "EFFECT_KEY",
    "TOTALS",
    "add_totals",
    "approved_effect_session",
    "lines",
    "resume_effect_in_process",
    "tally",
    "write_totals",
]
