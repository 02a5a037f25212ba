"""The outbox of :class:`~intermission.stores.MemoryStore`: rows in a dict, written under
the store's lock in the same step as the save (one process; the same rules as SQL)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterable
from typing import Any

from .. import _check
from ..errors import NotificationNotFoundError
from .outbox import OutboxRow, Status, Written, check_rows, check_take

__all__ = ["MemoryOutbox"]


@dataclasses.dataclass
class _Held:
    row: OutboxRow
    taken_by: str | None = None
    taken_until: float = 0.0


class MemoryOutbox:
    """``store.outbox`` of a MemoryStore (see :class:`~intermission.stores.outbox.Outbox`)."""

    def __init__(self, store: Any, enabled: bool) -> None:
        self.store = store
        self.enabled = enabled
        self.wake = threading.Event()
        self._rows: dict[str, _Held] = {}
        self._told: set[str] = set()
        self._handles: dict[str, tuple[float, dict[str, Any]]] = {}
        """Reply handles (see Written.held_until): key → (until when, payload)."""
        self.public_url: str | None = None

    def set_public_url(self, url: str | None) -> None:
        """See :meth:`Outbox.set_public_url`."""
        _check.text("url", url, optional=True)
        self.public_url = url

    def fix(self, key: str, payload: str) -> dict[str, Any] | None:
        """See :meth:`Outbox.fix`."""
        with self.store._lock:
            held = self._rows.get(key)
            if held is None:
                return None
            if held.row.payload.get("body") is None:
                held.row = dataclasses.replace(held.row, payload=json.loads(payload))
            return held.row.payload

    def enable(self, on: bool = True) -> None:
        """See :meth:`Outbox.enable` (a memory store has only this object to tell)."""
        _check.flag("on", on)
        self.enabled = on

    def held(self, key: str) -> dict[str, Any] | None:
        """See :meth:`Outbox.held`."""
        with self.store._lock:
            found = self._handles.get(key)
        return found[1] if found is not None and found[0] >= self.now_ms() else None

    def now_ms(self) -> float:
        """The store's clock."""
        return float(self.store.clock.now_ms())

    def write(self, rows: list[Written], now_ms: float) -> None:
        """Add a save's notifications (the caller holds the store's lock), their bodies
        fixed now (links under :attr:`public_url`)."""
        from ..notify.notification import with_body

        for r in rows:
            if r.held_until is None:
                r = with_body(r, now_ms, self.public_url)
            if r.once is not None:
                if r.once in self._told:
                    continue  # told already
                self._told.add(r.once)
            if r.held_until is not None:  # a reply handle: kept, never sent
                self._handles[r.key] = (r.held_until, json.loads(r.payload))
                continue
            self._rows[r.key] = _Held(OutboxRow(
                key=r.key, session_id=r.session_id, kind=r.kind, status="pending",
                created_ms=now_ms, due_ms=now_ms, attempts=0, done=(), last_error=None,
                payload=json.loads(r.payload),
            ))  # fmt: skip

    def take(self, owner: str, limit: int, lease_ms: float) -> list[OutboxRow]:
        """See :meth:`Outbox.take`."""
        check_take(owner, limit, lease_ms)
        now = self.now_ms()
        with self.store._lock:
            for key in [k for k, (until, _) in self._handles.items() if until < now]:
                del self._handles[key]  # (an expired reply handle)
            due = sorted(
                (h for h in self._rows.values()
                 if h.row.status == "pending" and h.row.due_ms <= now
                 and (h.taken_by is None or h.taken_until < now)),
                key=lambda h: (h.row.due_ms, h.row.created_ms),
            )[:limit]  # fmt: skip
            for held in due:
                held.taken_by, held.taken_until = owner, now + lease_ms
            return [h.row for h in due]

    def _update(self, key: str, **changes: Any) -> None:
        held = self._rows[key]
        held.row = dataclasses.replace(held.row, **changes)
        held.taken_by, held.taken_until = None, 0.0

    def delivered(self, key: str) -> None:
        """See :meth:`Outbox.delivered`."""
        with self.store._lock:
            self._rows.pop(key, None)

    def release(self, key: str, owner: str) -> None:
        """See :meth:`Outbox.release`."""
        with self.store._lock:
            held = self._rows.get(key)
            if held is not None and held.taken_by == owner:
                held.taken_by, held.taken_until = None, 0.0

    def failed(
        self, key: str, owner: str, error: str, done: Iterable[str], due_ms: float, dead: bool
    ) -> None:
        """See :meth:`Outbox.failed`."""
        with self.store._lock:
            held = self._rows.get(key)
            if held is None or held.row.status != "pending" or held.taken_by != owner:
                return
            self._update(key, status="dead" if dead else "pending", due_ms=due_ms,
                         done=tuple(sorted(done)), attempts=held.row.attempts + 1,
                         last_error=error[:500])  # fmt: skip

    def rows(self, status: Status | None = None, limit: int = 100) -> list[OutboxRow]:
        """See :meth:`Outbox.rows`."""
        check_rows(status, limit)
        with self.store._lock:
            found = [h.row for h in self._rows.values() if status in (None, h.row.status)]
        found.sort(key=lambda r: (-r.created_ms, r.key))
        return found[:limit]

    def retry(self, key: str) -> OutboxRow:
        """See :meth:`Outbox.retry`."""
        _check.text("key", key)
        with self.store._lock:
            if key not in self._rows:
                raise NotificationNotFoundError(key)
            self._update(key, status="pending", due_ms=self.now_ms(), attempts=0)
            row = self._rows[key].row
        self.wake.set()
        return row
