"""Who listens to what the core does: a registry that is empty unless an instrumentation
(tracing: :mod:`intermission.otel`) registers itself.

The core emits; it never knows who listens. Every event a run records, every action noted
on a session, every effect the ledger returns or runs, every request's end and every
store save's outcome pass through the functions here, and only when :data:`LISTENERS` is
not empty: with nobody listening,
the cost is one falsy check at each of those points (and node events stay unbuilt, as
they are without a stream). A listener that raises is logged and never stops a run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, Protocol

from .. import audit as _audit

__all__ = [
    "LISTENERS", "Listener", "add", "effect", "ended", "event", "muted", "noted", "remove",
    "saved", "wants_node_events",
]  # fmt: skip

log = logging.getLogger("intermission.listeners")


class Listener(Protocol):
    """What a listener is told (every call is synchronous, on the thread that acted)."""

    def on_event(self, session: Any, event: Any) -> None:
        """An event was recorded on ``session`` (inside a request or outside one: a
        decision written by a reviewer, a deadline swept)."""

    def on_note(self, session: Any, entry: Any) -> None:
        """An audit entry was noted on ``session`` (a decision, a refusal, an expiry …)."""

    def on_effect(self, session: Any, key: str, outcome: Literal["ran", "replayed"]) -> None:
        """``session.once(key, …)`` ran its effect, or returned the ledger's recorded result
        instead (the key is the caller's idempotency key: never to be exported)."""

    def on_end(self, session: Any, error: BaseException | None) -> None:
        """A top-level request on ``session`` ended (``error``: it raised or was
        cancelled); called before the caller gets the result, so before any save."""

    def on_saved(self, session: Any, committed: bool) -> None:
        """A store's save of ``session`` committed (``committed``), or lost compare-and-set
        (False: the store keeps another copy; what this one recorded since it was loaded
        is not on record). Optional: a listener without it is not told."""

    # Optional too: ``wants_node_events(session) -> bool``. A listener that has it and
    # answers False is not told of graph node events on that session (they stay unbuilt,
    # as without listeners); one without it is told of every event.


LISTENERS: list[Listener] = []
"""The registered listeners; the core checks it is empty before doing anything else."""


def add(listener: Listener) -> None:
    """Register ``listener`` (once)."""
    if listener not in LISTENERS:
        LISTENERS.append(listener)


def wants_node_events(session: Any) -> bool:
    """Whether a registered listener wants ``session``'s graph node events (call only when
    :data:`LISTENERS` is not empty): a node costs a listener nothing unless it does."""
    for listener in LISTENERS:
        wants = getattr(listener, "wants_node_events", None)
        if wants is None or wants(session):
            return True
    return False


def remove(listener: Listener) -> None:
    """Unregister ``listener`` (nothing happens when it is not registered)."""
    if listener in LISTENERS:
        LISTENERS.remove(listener)


_MUTED: ContextVar[bool] = ContextVar("intermission_listeners_muted", default=False)


@contextmanager
def muted() -> Iterator[None]:
    """Tell no listener what happens inside (a decision checked on a read copy that is
    never saved: what it records there is not on record)."""
    token = _MUTED.set(True)
    try:
        yield
    finally:
        _MUTED.reset(token)


def _tell(method: str, *args: Any) -> None:
    if _MUTED.get():
        return
    for listener in tuple(LISTENERS):
        told = getattr(listener, method, None)
        if told is None:  # (an optional method this listener does not have)
            continue
        try:
            told(*args)
        except Exception:  # a listener never breaks what it watches
            log.exception("listener %r failed in %s", listener, method)


def event(session: Any, item: Any) -> None:
    """Tell every listener about an event (call only when LISTENERS is not empty)."""
    _tell("on_event", session, item)


def noted(session: Any, entry: Any) -> None:
    """Tell every listener about a noted audit entry."""
    _tell("on_note", session, entry)


def effect(session: Any, key: str, outcome: Literal["ran", "replayed"]) -> None:
    """Tell every listener that an effect ran or was replayed from the ledger."""
    _tell("on_effect", session, key, outcome)


def ended(session: Any, error: BaseException | None) -> None:
    """Tell every listener that a top-level request ended."""
    _tell("on_end", session, error)


def _on_note(session: Any, entry: Any) -> None:
    if LISTENERS:
        noted(session, entry)


# the audit module is data below the core: it tells whoever registered of each noted entry
_audit.NOTE_HOOKS.append(_on_note)


def saved(session: Any, committed: bool) -> None:
    """Tell every listener that a store's save of ``session`` committed, or lost
    compare-and-set (called by the stores, after the commit or the conflict)."""
    _tell("on_saved", session, committed)
