"""Processes that resume a stored session, for race and crash tests of stores.

``python -m intermission.testing.workers STORE SESSION_ID EFFECT_FILE [LEASE_MS]`` resumes a
paused change-approval session once; the effect appends one line to EFFECT_FILE.
"""

from __future__ import annotations

import os
import sys
import time

from ..errors import IntermissionError
from ..examples import build_change_graph
from ..stores.open import open_store

__all__ = ["append_effect", "resume_change"]


def append_effect(path: str, pause_s: float = 0.0) -> object:
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


def resume_change(
    store_target: str,
    session_id: str,
    effect_path: str,
    lease_ms: float = 60_000.0,
    pause_s: float = 0.0,
) -> str:
    """Resume the change graph on a stored session; returns what happened."""
    store = open_store(store_target, lease_ms=lease_ms)
    team = build_change_graph(append_effect(effect_path, pause_s))  # type: ignore[arg-type]
    try:
        with store.resume(session_id) as session:
            team.prompt().session(session).call()
        return "ran"
    except IntermissionError as exc:
        return type(exc).__name__
    finally:
        store.close()


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    lease = float(sys.argv[4]) if len(sys.argv) > 4 else 60_000.0
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    print(resume_change(sys.argv[1], sys.argv[2], sys.argv[3], lease, pause), flush=True)
