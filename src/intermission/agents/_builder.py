"""What every agent builder shares: the name, the clock and the id factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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
        self._version: str | None = None
        self._migrations: dict[str, Callable[[Any], None]] = {}

    def name(self: B, name: str) -> B:
        """The agent's name (also its node id in a team)."""
        from .._json import check_text

        _check.text("name", name, empty=False)
        check_text("agent name", name, allow_nul=False)
        self._name = name
        return self

    def version(self: B, label: str) -> B:
        """The agent's version (R62): a paused session resumes on the version it paused
        under, or is migrated on purpose (``migrates_from``). Default: the fingerprint."""
        from .._json import check_text

        _check.text("version", label, empty=False)
        check_text("agent version", label, allow_nul=False)
        if "@" in label or len(label) > 64:
            raise UsageError(f"a version label has no '@' and at most 64 characters: {label!r:.80}")
        self._version = label
        return self

    def migrates_from(self: B, version: str, fn: Callable[[Any], None]) -> B:
        """Upcast sessions paused on ``version`` with ``fn(session)`` (see
        ``AgentBase.migrates_from``)."""
        _check.text("version", version, empty=False)
        _check.function("fn", fn)
        self._migrations[version] = fn
        return self

    def _versioned(self, agent: Any) -> None:
        """Give a built agent this builder's version and migrations."""
        agent._version = self._version
        for version, fn in self._migrations.items():
            agent.migrates_from(version, fn)

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
