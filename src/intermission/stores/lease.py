"""Claims are leases: renewed while their holder works, so a slow resume keeps its claim,
and a holder that dies stops renewing, so its claim lapses (R40).

One daemon thread per store renews every live lease a third of the lease time after its
last renewal. A resume shorter than that never meets the thread: registering a lease is a
dict insert, and no renewal commit happens (the bench holds pause/resume to that).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import IntermissionError

__all__ = ["Lease", "Leases"]

Renew = Callable[[str, str], bool]
"""``renew(session_id, token)`` → False when the claim is no longer this holder's."""


class Lease:
    """One held claim: its session, token and when it is next renewed (monotonic s)."""

    __slots__ = ("due", "lost", "session_id", "token")

    def __init__(self, session_id: str, token: str, due: float) -> None:
        self.session_id = session_id
        self.token = token
        self.due = due
        self.lost = False
        """Set when a renewal found the claim taken by someone else."""


class Leases:
    """The live leases of one store and the thread that renews them."""

    def __init__(self, lease_ms: float, renew: Renew, *, enabled: bool = True) -> None:
        self.interval = max(lease_ms / 3000.0, 0.01)
        self.renew = renew
        self.enabled = enabled
        self._live: dict[str, Lease] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def hold(self, session_id: str, token: str) -> Lease:
        """Start renewing a claim just taken."""
        lease = Lease(session_id, token, time.monotonic() + self.interval)
        if not self.enabled:
            return lease
        with self._cond:
            self._live[token] = lease
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._loop, name="intermission-lease", daemon=True
                )
                self._thread.start()
        return lease

    def release(self, lease: Lease) -> None:
        """Stop renewing (the claim is being released or saved away)."""
        if self.enabled:
            with self._cond:
                self._live.pop(lease.token, None)

    def close(self) -> None:
        """Stop the thread (the store is closing)."""
        with self._cond:
            self._closed = True
            self._live.clear()
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                due = [lease for lease in self._live.values() if lease.due <= now]
                if not due:
                    wake = min((lease.due for lease in self._live.values()), default=None)
                    self._cond.wait(None if wake is None else max(wake - now, 0.001))
                    continue
            for lease in due:
                self._renew(lease)

    def _renew(self, lease: Lease) -> None:
        try:
            kept = self.renew(lease.session_id, lease.token)
        except IntermissionError:
            kept = True  # the database is away: try again soon; fencing guards the rest
            lease.due = time.monotonic() + min(self.interval, 0.5)
        else:
            lease.due = time.monotonic() + self.interval
        if not kept:
            lease.lost = True
            with self._cond:
                self._live.pop(lease.token, None)
