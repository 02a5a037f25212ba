"""Clocks: every timestamp in events, decisions and snapshots comes from one of these."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """Anything that tells the time in epoch milliseconds."""

    def now_ms(self) -> float:
        """The current time in epoch milliseconds."""
        ...


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> float:
        """The current wall-clock time in epoch milliseconds."""
        return time.time() * 1000.0

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A deterministic clock for tests and notebooks: each reading advances by ``step_ms``.

    Example:
        >>> c = FakeClock(start_ms=1000, step_ms=5)
        >>> c.now_ms(), c.now_ms()
        (1000.0, 1005.0)
    """

    def __init__(self, start_ms: float = 1_700_000_000_000.0, step_ms: float = 1.0) -> None:
        from ._check import number

        number("start_ms", start_ms, 0, 1e15)
        number("step_ms", step_ms, 0, 1e12)
        self._t = float(start_ms)
        self._step = float(step_ms)

    def now_ms(self) -> float:
        """Return the current fake time, then advance it by one step."""
        t = self._t
        self._t += self._step
        return t

    def advance(self, ms: float) -> None:
        """Move the clock forward by ``ms`` milliseconds."""
        from ._check import number

        self._t += number("ms", ms, 0, 1e15)

    def __repr__(self) -> str:
        return f"FakeClock(at={self._t}, step_ms={self._step})"


SYSTEM_CLOCK = SystemClock()
