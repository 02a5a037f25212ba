"""Re-reading a view's session every few seconds on a daemon thread, so a decision made
elsewhere shows without a click (R51). One small seam: a front end without threads can
replace :func:`every` (the views also re-check on every interaction)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["every"]


def every(seconds: float, owner: Any, tick: Callable[[Any], bool]) -> threading.Event:
    """Call ``tick(owner)`` every ``seconds`` until it returns False, the returned event is
    set, or ``owner`` is gone (only a weak reference is kept: a view nobody holds stops).
    An exception in ``tick`` is ignored: the next tick tries again."""
    stop = threading.Event()
    ref = weakref.ref(owner)
    del owner

    def loop() -> None:
        while not stop.wait(seconds):
            target = ref()
            if target is None:
                return
            try:
                going_on = tick(target)
            except Exception:  # the store is away for a moment: try again next time
                going_on = True
            del target
            if not going_on:
                return

    threading.Thread(target=loop, name="intermission-view-poll", daemon=True).start()
    return stop
