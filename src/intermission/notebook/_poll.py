"""Re-reading a view's session every few seconds, so a decision made elsewhere shows
without a click (R51). It runs where the package runs its other periodic work (a daemon
thread; an asyncio task in the browser: see ``_concurrency``)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .._concurrency import Ticker
from .._concurrency import every as _every

__all__ = ["every"]


def every(seconds: float, owner: Any, tick: Callable[[Any], bool]) -> Ticker:
    """Call ``tick(owner)`` every ``seconds`` until it returns False, the returned ticker is
    stopped, or ``owner`` is gone (only a weak reference is kept: a view nobody holds stops).
    An exception in ``tick`` is ignored: the next tick tries again."""
    ref = weakref.ref(owner)
    del owner

    def step() -> bool:
        target = ref()
        if target is None:
            return False
        try:
            return bool(tick(target))
        except Exception:  # the store is away for a moment: try again next time
            return True

    return _every(seconds, step, name="intermission-view-poll")
