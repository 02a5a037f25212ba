"""Claims are leases: renewed while their holder works, so a slow resume keeps its claim,
and a holder that dies stops renewing, so its claim lapses (R40).

One ticker per store (a daemon thread; an asyncio task in the browser, see
``_concurrency``) renews every live lease a third of the lease time after its last renewal.
A resume shorter than that never meets the ticker: registering a lease is a dict insert,
and no renewal commit happens (the bench holds pause/resume to that).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .._concurrency import Ticker, every
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
    """The live leases of one store and the ticker that renews them.

    Registering is a dict insert and releasing a pop (atomic under the GIL: no lock on
    the resume path); the ticker wakes every half renewal interval and renews the leases
    that are due, so a lease is renewed at the latest two thirds of the way through.
    """

    def __init__(self, lease_ms: float, renew: Renew, *, enabled: bool = True) -> None:
        self.interval = max(lease_ms / 3000.0, 0.01)
        self.renew = renew
        self.enabled = enabled
        self._live: dict[str, Lease] = {}
        self._closed = False
        self._start_lock = threading.Lock()
        self._ticker: Ticker | None = None

    def hold(self, session_id: str, token: str) -> Lease:
        """Start renewing a claim just taken."""
        lease = Lease(session_id, token, time.monotonic() + self.interval)
        if self.enabled:
            self._live[token] = lease
            if self._ticker is None:
                self._start()
        return lease

    def release(self, lease: Lease) -> None:
        """Stop renewing (the claim is being released or saved away)."""
        self._live.pop(lease.token, None)

    def _start(self) -> None:
        with self._start_lock:
            if self._ticker is None and not self._closed:
                self._ticker = every(self.interval / 2, self._tick, name="intermission-lease")

    def close(self) -> None:
        """Stop renewing (the store is closing)."""
        with self._start_lock:
            self._closed = True
        self._live.clear()
        if self._ticker is not None:
            self._ticker.stop(timeout=5)

    def _tick(self) -> None:
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
