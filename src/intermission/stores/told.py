"""Listeners learn how a store's save ended: committed, or lost compare-and-set (a stale
copy: the store keeps another). Tracing reports a pause, and what a copy recorded outside
a request, only once the save that keeps it committed (R60)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..core import listeners
from ..errors import ConflictError

__all__ = ["telling"]


@contextmanager
def telling(
    session: Any, lost: tuple[type[BaseException], ...] = (ConflictError,)
) -> Iterator[None]:
    """Around a save of ``session``: tell the listeners it committed, or that it was lost
    (``lost``: the errors after which this copy can never be saved). Any other error tells
    nothing: the save may be tried again."""
    try:
        yield
    except lost:
        if listeners.LISTENERS:
            listeners.saved(session, False)
        raise
    if listeners.LISTENERS:
        listeners.saved(session, True)
