"""Showing a view with a display id and redrawing it in place as a run moves."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

__all__ = ["LiveDisplay"]

V = TypeVar("V", bound="LiveDisplay")


class LiveDisplay:
    """``display()`` once, then ``update()`` or ``follow(stream)`` redraw the same output."""

    _handle: Any = None

    def display(self: V) -> V:
        """Show it in the notebook with a display id (so :meth:`update` redraws in place)."""
        from IPython.display import display

        self._handle = display(self, display_id=True)
        return self

    def update(self) -> None:
        """Redraw where :meth:`display` showed it."""
        if self._handle is not None:
            self._handle.update(self)

    def _redraws_on(self, event: Any) -> bool:
        return True

    def follow(self, events: Iterable[Any]) -> list[Any]:
        """Live mode: consume a (sync) event stream, redrawing as events arrive."""
        seen = []
        for event in events:
            seen.append(event)
            if self._redraws_on(event):
                self.update()
        self.update()
        return seen
