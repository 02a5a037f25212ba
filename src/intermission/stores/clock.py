"""The database's clock, read without asking the database each time.

Every process sharing a PostgreSQL store stamps and judges time (claims, leases,
``updated_ms``, decision deadlines) by the server's clock, so application servers whose own
clocks disagree still agree on who holds a claim and whether a deadline passed. Inside
statements the server reads its clock itself; in Python (a deadline judged before anything
is claimed, an ``[expired]`` mark) :class:`ServerClock` gives the same time from the local
monotonic clock plus an offset measured from the database, refreshed by values the claim
and renewal statements return anyway: no query is added for it.
"""

from __future__ import annotations

import time

__all__ = ["ServerClock"]


class ServerClock:
    """The store server's time in epoch milliseconds: the local monotonic clock plus an
    offset taken from the last reading of the server's clock (within half a round trip).
    The local wall clock plays no part: a process whose clock is minutes off agrees."""

    __slots__ = ("_offset",)

    def __init__(self, offset_ms: float | None = None) -> None:
        self._offset = offset_ms

    def observe(self, server_ms: float, sent: float, answered: float) -> None:
        """Record the server's clock read between the monotonic instants ``sent`` and
        ``answered`` (seconds). The first reading sets the offset (the midpoint is the best
        guess of when it was read); later ones move it only as far as they must to agree
        with it, so the clock does not jitter with each round trip's length, and follows a
        server clock that was set anew."""
        low = float(server_ms) - answered * 1000.0  # read at the latest when answered
        high = float(server_ms) - sent * 1000.0  # and at the earliest when sent
        if self._offset is None:
            self._offset = (low + high) / 2.0
        else:
            self._offset = min(max(self._offset, low), high)

    @property
    def known(self) -> bool:
        """True once the server's clock has been read."""
        return self._offset is not None

    def now_ms(self) -> float:
        """The server's current time (epoch milliseconds)."""
        if self._offset is None:  # not read yet: the store reads it when it opens
            return time.time() * 1000.0
        return time.monotonic() * 1000.0 + self._offset

    def __repr__(self) -> str:
        return "ServerClock()"
