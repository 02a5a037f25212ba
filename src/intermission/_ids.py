"""Id factories: random by default, sequential and deterministic for tests and notebooks."""

from __future__ import annotations

import itertools
from typing import Protocol

__all__ = ["IdFactory", "RandomIds", "SequentialIds"]


class IdFactory(Protocol):
    """A callable that returns a fresh id for a kind of thing (``"call"``, ``"run"``)."""

    def __call__(self, kind: str) -> str:
        """Return a new id."""
        ...


class RandomIds:
    """uuid4 ids (the default)."""

    def __call__(self, kind: str) -> str:
        """Return a random uuid4 string."""
        import uuid  # lazy: keeps `import intermission` lean

        return str(uuid.uuid4())

    def __repr__(self) -> str:
        return "RandomIds()"


class SequentialIds:
    """Deterministic ids ``<kind>-1``, ``<kind>-2`` … (one counter per kind).

    The counters live in this object: a session resumed in another process (with a new
    ``SequentialIds``) sees the same ids again, so keep these for tests and notebooks and
    the default random ids for sessions that travel.

    Example:
        >>> ids = SequentialIds()
        >>> ids("call"), ids("call"), ids("run")
        ('call-1', 'call-2', 'run-1')
    """

    def __init__(self, prefix: str = "") -> None:
        from ._check import text

        self._prefix = text("prefix", prefix)
        self._counters: dict[str, itertools.count[int]] = {}

    def __call__(self, kind: str) -> str:
        """Return the next id for ``kind``."""
        counter = self._counters.setdefault(kind, itertools.count(1))
        return f"{self._prefix}{kind}-{next(counter)}"

    def __repr__(self) -> str:
        return f"SequentialIds(prefix={self._prefix!r})"


RANDOM_IDS = RandomIds()
