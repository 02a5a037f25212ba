"""Processes that resume a stored session, for race, crash and fault tests of stores.

``python -m intermission.testing.workers STORE SESSION_ID EFFECT_FILE [LEASE_MS] [PAUSE_S]
[GRAPH] [HOLD_S]`` resumes a paused session once and prints what happened; the effect
appends one line to EFFECT_FILE and then sleeps PAUSE_S. GRAPH is ``change`` (the
change-approval team, default) or ``effect`` (:func:`effect_graph`, no models: approval
gate, then one ledgered effect). HOLD_S: how long the run waits after the graph finished,
before its final save (a window for crash tests to land in).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..core.context import FlowContext
from ..core.engine import FlowEngine
from ..core.graph import Node
from ..core.spec import END, GraphSpec
from ..errors import IntermissionError
from ..examples import build_change_graph, change_approval_task
from ..stores.open import open_store

__all__ = ["EFFECT_KEY", "append_effect", "effect_graph", "resume_change", "resume_effect"]

EFFECT_KEY = "change-001/execute"
"""The idempotency key of the effect in both graphs."""


def append_effect(path: str, pause_s: float = 0.0) -> Callable[[str], str]:
    """An effect that leaves a trace: one appended line per run (O_APPEND is atomic)."""

    def effect(change_id: str) -> str:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{change_id} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        if pause_s:
            time.sleep(pause_s)
        return f"applied {change_id}"

    return effect


def effect_graph(
    effect: Callable[[str], Any],
    before: Callable[[FlowContext], None] | None = None,
    after: Callable[[FlowContext], None] | None = None,
) -> GraphSpec:
    """``start → approval (gate) → execute → end``: ``execute`` runs ``effect`` through the
    ledger (``session.once``); an error in the effect fails the run, which stays
    resumable. ``before``/``after`` run around the effect in the same task (fault tests
    stall there, or put values no store can keep)."""

    def execute(ctx: FlowContext, node: Node) -> None:
        assert ctx.session is not None
        if before is not None:
            before(ctx)
        ctx.put("change.result", ctx.session.once(EFFECT_KEY, lambda: effect("change-001")))
        if after is not None:
            after(ctx)

    spec = GraphSpec("effect")
    spec.add_start().link_add("approval")
    spec.add_activity("approval").task(change_approval_task).link_add("execute")
    spec.add_activity("execute").task(execute).link_add(END)
    spec.add_end()
    return spec


def resume_change(
    store_target: str,
    session_id: str,
    effect_path: str,
    lease_ms: float = 60_000.0,
    pause_s: float = 0.0,
) -> str:
    """Resume the change graph on a stored session; returns what happened."""
    team = build_change_graph(append_effect(effect_path, pause_s))
    return _resumed(
        store_target, session_id, lease_ms, lambda s: team.prompt().session(s).call()
    )


def resume_effect(
    store_target: str,
    session_id: str,
    effect_path: str,
    lease_ms: float = 60_000.0,
    pause_s: float = 0.0,
    hold_s: float = 0.0,
) -> str:
    """Resume :func:`effect_graph` on a stored session; returns what happened."""
    spec = effect_graph(append_effect(effect_path, pause_s))

    def run(session: Any) -> None:
        FlowEngine().eval(spec, session.context)
        time.sleep(hold_s)

    return _resumed(store_target, session_id, lease_ms, run)


def _resumed(
    store_target: str, session_id: str, lease_ms: float, run: Callable[[Any], Any]
) -> str:
    """``run(session)`` under the store's claim: ``"ran"``, or the typed error's name."""
    store = open_store(store_target, lease_ms=lease_ms)
    try:
        with store.resume(session_id) as session:
            run(session)
        return "ran"
    except IntermissionError as exc:
        return type(exc).__name__
    finally:
        store.close()


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    lease = float(sys.argv[4]) if len(sys.argv) > 4 else 60_000.0
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    if len(sys.argv) > 6 and sys.argv[6] == "effect":
        hold = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
        outcome = resume_effect(sys.argv[1], sys.argv[2], sys.argv[3], lease, pause, hold)
    else:
        outcome = resume_change(sys.argv[1], sys.argv[2], sys.argv[3], lease, pause)
    print(outcome, flush=True)
