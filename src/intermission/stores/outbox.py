"""The outbox: notifications a save writes in its own transaction, as data.

A store with its outbox on writes, in the transaction of each save, the notifications that
save causes (see :mod:`intermission.stores.outbox_rules` for how they are derived): a save
that fails or is refused rolls back with them, so none is ever written for a pause that did
not happen; one that commits has them, so none is lost when the process dies next. A
dispatcher (:mod:`intermission.notify`) takes them from ``store.outbox``.

Each notification gets a key minted here (random, 128 bits): the idempotency key a
dispatcher sends with every attempt.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

__all__ = [
    "KINDS",
    "NotificationKind",
    "Outbox",
    "OutboxRow",
    "Status",
    "Written",
    "check_rows",
    "check_take",
    "new_key",
]

NotificationKind = Literal[
    "pending", "warning", "escalated", "expired", "decided", "unknown_outcome"
]
KINDS: tuple[str, ...] = (
    "pending", "warning", "escalated", "expired", "decided", "unknown_outcome",
)  # fmt: skip
"""Every kind of notification: ``pending`` (a session paused for a person), ``warning``
(a deadline is near), ``escalated``, ``expired``, ``decided``, ``unknown_outcome`` (an
effect started and its end was never recorded: a person must check)."""


def new_key() -> str:
    """A fresh notification key: random, so nobody can derive or predict it."""
    return "ntf_" + os.urandom(16).hex()


# -- what a save writes ---------------------------------------------------------------
class Written(NamedTuple):
    """A notification a save writes."""

    key: str
    session_id: str
    kind: str
    payload: str
    """Canonical JSON (see :func:`~intermission.stores.outbox_rules.derive`)."""
    once: str | None = None
    """A mark that makes it told once: a save that derives it again (an effect of unknown
    outcome, seen by every save until a person resolves it) writes nothing."""
    held_until: float | None = None
    """A *reply handle*, not a notification: kept (never sent) until this time, for the
    rows of later saves that name it by its key (:meth:`Outbox.held`). It holds where a
    message a person acted on is updated (a credential: only ever in the outbox)."""


# -- what a dispatcher sees -------------------------------------------------------------
Status = Literal["pending", "dead"]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A notification waiting in the outbox (a delivered one leaves it)."""

    key: str
    """The idempotency key, sent with every attempt."""
    session_id: str
    kind: str
    status: Status
    """``pending`` (to be delivered, maybe after failed attempts) or ``dead`` (it failed
    too often: ``outbox --retry KEY`` makes it due again)."""
    created_ms: float
    due_ms: float
    attempts: int
    done: tuple[str, ...]
    """Names of the targets that took it already (a retry skips them)."""
    last_error: str | None
    payload: dict[str, Any]


def check_take(owner: Any, limit: Any, lease_ms: Any) -> None:
    """The arguments of ``outbox.take``."""
    from .. import _check

    _check.text("owner", owner, empty=False)
    _check.count("limit", limit, 1, 1000)
    _check.number("lease_ms", lease_ms, 1, 1e10)


def check_rows(status: Any, limit: Any) -> None:
    """The arguments of ``outbox.rows``."""
    from .. import _check
    from ..errors import UsageError

    if status not in (None, "pending", "dead") or isinstance(status, bool):
        raise UsageError(f"status is pending, dead or None, not {_check.shown(status)}")
    _check.count("limit", limit, 1, 100_000)


class Outbox(Protocol):
    """A store's outbox (``store.outbox``): what dispatchers and the CLI use.

    Rows are taken under a lease (``take``): a dispatcher that dies before settling them
    gives them back when the lease ends, and another delivers them again, with the same
    key. On PostgreSQL several dispatchers take rows at once, each row by one of them. A
    delivered notification leaves the outbox (the dispatcher's log says where it went), so
    what the outbox holds is what waits or failed: a save adds one row, no index entries
    but its key."""

    enabled: bool
    """Whether this store's saves write notifications."""
    wake: threading.Event
    """Set when a save of this store object wrote a notification (a dispatcher in the
    same process delivers at once instead of at its next poll)."""

    def enable(self, on: bool = True) -> None:
        """Turn writing on (or off) for this store object and record it in the database,
        so that stores opened on it later (``outbox=None``) follow."""
        ...

    public_url: str | None
    """Where reviewers open the console: the links of the notifications this store object
    writes (None: the first dispatcher that takes one fixes its links)."""

    def set_public_url(self, url: str | None) -> None:
        """Record ``url`` as :attr:`public_url` (in the database too: stores opened on it
        later follow). A dispatcher given a public URL records it."""
        ...

    def fix(self, key: str, payload: str) -> dict[str, Any] | None:
        """Store ``payload`` (one whose body is fixed) for ``key`` unless the row's body
        was fixed already, and return the stored payload: whoever fixed it first, every
        dispatcher sends that body. None: the row is gone (another dispatcher delivered
        it)."""
        ...

    def take(self, owner: str, limit: int, lease_ms: float) -> list[OutboxRow]:
        """Take up to ``limit`` due rows for ``owner`` until the lease ends."""
        ...

    def delivered(self, key: str) -> None:
        """Remove a delivered notification."""
        ...

    def failed(
        self, key: str, owner: str, error: str, done: Iterable[str], due_ms: float, dead: bool
    ) -> None:
        """Record a failed attempt while ``owner`` holds the row: try again at ``due_ms``,
        or give up (``dead``)."""
        ...

    def release(self, key: str, owner: str) -> None:
        """Hand a row ``owner`` took back, untried (due again at once)."""
        ...

    def rows(self, status: Status | None = None, limit: int = 100) -> list[OutboxRow]:
        """Notifications waiting or dead, newest first (of one ``status``)."""
        ...

    def retry(self, key: str) -> OutboxRow:
        """Make a dead (or failing) notification due now, its attempts counted anew."""
        ...

    def held(self, key: str) -> dict[str, Any] | None:
        """The payload of reply handle ``key`` (see :attr:`Written.held_until`); None when
        there is none, or it expired. Expired handles are removed as rows are taken."""
        ...

    def now_ms(self) -> float:
        """The store's clock."""
        ...
