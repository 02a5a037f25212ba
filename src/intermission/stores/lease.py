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
    """The live leases of one store and the thread that renews them.

    Registering is a dict insert and releasing a pop (atomic under the GIL: no lock on
    the resume path); the thread wakes every half renewal interval and renews the leases
    that are due, so a lease is renewed at the latest two thirds of the way through.
    """

    def __init__(self, lease_ms: float, renew: Renew, *, enabled: bool = True) -> None:
        self.interval = max(lease_ms / 3000.0, 0.01)
        self.renew = renew
        self.enabled = enabled
        self._live: dict[str, Lease] = {}
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, session_id: str, token: str) -> Lease:
        """Start renewing a claim just taken."""
        lease = Lease(session_id, token, time.monotonic() + self.interval)
        if self.enabled:
            self._live[token] = lease
            if self._thread is None:
                self._start()
        return lease

    def release(self, lease: Lease) -> None:
        """Stop renewing (the claim is being released or saved away)."""
        self._live.pop(lease.token, None)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._loop, name="intermission-lease", daemon=True
                )
                self._thread.start()

    def close(self) -> None:
        """Stop the thread (the store is closing)."""
        self._stop.set()
        self._live.clear()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _loop(self) -> None:
        tick = self.interval / 2
        while not self._stop.wait(tick):
            now = time.monotonic()
            for lease in list(self._live.values()):
                if lease.due <= now and lease.token in self._live:
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
            self._live.pop(lease.token, None)
