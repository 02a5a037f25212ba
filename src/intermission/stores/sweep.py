"""The deadline sweeper: nothing runs when an approval's deadline passes, so something must
come by and record what fell due — a warning before the deadline, an escalation or an
expiry at it (see :mod:`intermission.hitl.timeouts`).

:func:`sweep_deadlines` asks the store for the sessions whose next due time (``due_ms``, an
indexed column of the session row) has passed by the store's clock, claims each, records
what fell due under the claim and saves. A session someone else holds is left for the
next sweep (its holder records what fell due when it meets the deadline). ``python -m
intermission sweep --store URL [--every S]`` runs it, and ``serve`` runs it periodically.

Versions (R62): a sweep runs none of a session's agent code — the deadline policy it
applies was stored with the approval when the session paused, and an expiry only records
a decision that the session's own version applies when it resumes — so it takes no agent
and sweeps sessions of every version, those of versions the server does not serve too.
Were ``serve`` to skip them, the sessions of a drained-away version would never have their
warnings, escalations and expiries recorded; its claim on one lasts one save.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .. import _check
from ..errors import (
    ConflictError,
    LeaseLostError,
    NothingToResumeError,
    SessionBusyError,
    SessionNotFoundError,
    SnapshotError,
    StoreError,
    UsageError,
)
from ..hitl.timeouts import apply_deadlines

__all__ = ["DeadlineSweeper", "sweep_deadlines"]

log = logging.getLogger("intermission.sweep")


def sweep_deadlines(store: Any, *, now_ms: float | None = None, limit: int = 100) -> list[str]:
    """Record every warning, escalation and expiry that fell due (by ``now_ms``, default
    the store's clock) in ``store``'s sessions, at most ``limit`` sessions; returns the ids
    of the sessions it changed. Safe to run from several processes at once: each session
    is changed under its claim."""
    due = getattr(store, "due", None)
    if not callable(due):
        raise UsageError(f"{type(store).__name__} keeps no deadline index (no due()); "
                         "use MemoryStore, SQLiteStore or PostgresStore")  # fmt: skip
    _check.count("limit", limit, 1, 100_000)
    _check.number("now_ms", now_ms, 0, 1e15, optional=True)
    now = float(store.clock.now_ms()) if now_ms is None else float(now_ms)
    changed: list[str] = []
    for session_id in due(now, limit):
        try:
            with store.resume(session_id) as session:
                if apply_deadlines(session, now):
                    changed.append(session_id)
        except (SessionBusyError, NothingToResumeError, SessionNotFoundError, ConflictError,
                LeaseLostError):  # fmt: skip
            continue  # held, finished or gone meanwhile: whoever has it meets the deadline
        except SnapshotError as exc:  # an unreadable row: reported, never a stuck sweeper
            log.warning("deadline sweep skipped session %r: %s", session_id, exc)
    return changed


class DeadlineSweeper:
    """Sweeps a store every ``every_s`` seconds in a daemon thread until :meth:`stop`
    (what ``serve`` runs beside the server). A failing sweep (the database away) is
    logged and tried again at the next tick."""

    def __init__(
        self, store: Any, every_s: float = 5.0, on_sweep: Callable[[list[str]], None] | None = None
    ) -> None:
        _check.number("every_s", every_s, 0.01, 86_400)
        self.store = store
        self.every_s = float(every_s)
        self.on_sweep = on_sweep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="intermission-sweep",
                                        daemon=True)  # fmt: skip

    def start(self) -> DeadlineSweeper:
        """Start sweeping; returns itself."""
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                swept = sweep_deadlines(self.store)
            except StoreError as exc:
                log.warning("deadline sweep failed: %s", exc)
                continue
            if swept and self.on_sweep is not None:
                self.on_sweep(swept)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sweeping (waits for a sweep in progress, at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
