"""What every agent builder shares: the name, the clock and the id factory."""

from __future__ import annotations

from typing import TypeVar

from .. import _check
from .._check import shown
from .._clock import Clock
from .._ids import RANDOM_IDS, IdFactory
from ..errors import UsageError

__all__ = ["BuilderBase"]

B = TypeVar("B", bound="BuilderBase")


class BuilderBase:
    """Fluent setters common to ReActAgent and TeamAgent builders."""

    def __init__(self, default_name: str) -> None:
        self._name = default_name
        self._clock: Clock | None = None
        self._ids: IdFactory = RANDOM_IDS
        self._checkpoints = "request"

    def name(self: B, name: str) -> B:
        """The agent's name (also its node id in a team)."""
        from .._json import check_text

        _check.text("name", name, empty=False)
        check_text("agent name", name, allow_nul=False)
        self._name = name
        return self

    def clock(self: B, clock: Clock) -> B:
        """The clock stamping events (a FakeClock makes timelines deterministic);
        default: the session's clock."""
        if not callable(getattr(clock, "now_ms", None)):
            raise UsageError(f"clock has a now_ms() method (FakeClock), not {shown(clock)}")
        self._clock = clock
        return self

    def checkpoints(self: B, every: str) -> B:
        """When the session's history takes a checkpoint: ``"request"`` (every request
        end, the default) or ``"node"`` (also every node or ReAct step it enters, R43)."""
        if every not in ("request", "node"):
            raise UsageError(f"checkpoints is 'request' or 'node', not {shown(every)}")
        self._checkpoints = every
        return self

    def ids(self: B, ids: IdFactory) -> B:
        """The id factory for run, reason and call ids."""
        _check.function("ids", ids)
        self._ids = ids
        return self
