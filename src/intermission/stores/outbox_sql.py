"""The outbox of the SQL stores: rows in ``im_outbox``, written inside the save's
transaction, taken by dispatchers under a lease (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so
several dispatchers never take one row at once; SQLite: its write lock serialises them),
deleted once delivered."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .. import _check
from ..errors import NotificationNotFoundError
from .outbox import OutboxRow, Status, Written, check_rows, check_take

__all__ = ["SQLOutbox", "write"]

_COLUMNS = "key, session_id, kind, status, created_ms, due_ms, attempts, done, last_error, payload"
_INSERT = (
    "INSERT INTO im_outbox (key, session_id, kind, payload, created_ms, status, due_ms, "
    "attempts, done) VALUES (?, ?, ?, ?, ?, 'pending', ?, 0, '[]')"
)
_HOLD = (
    "INSERT INTO im_outbox (key, session_id, kind, payload, created_ms, status, due_ms, "
    "attempts, done) VALUES (?, ?, ?, ?, ?, 'held', ?, 0, '[]')"
)
"""A reply handle: ``due_ms`` is when it expires."""


def write(
    run: Callable[..., Any], rows: list[Written], now_ms: float, public_url: str | None = None
) -> None:
    """Insert a save's notifications (inside its transaction), their bodies fixed now
    (links under ``public_url``): every dispatcher sends the same bytes for a key."""
    from ..notify.notification import with_body

    for r in rows:
        if r.held_until is None:
            r = with_body(r, now_ms, public_url)
        if r.once is not None:
            told = run(
                "INSERT INTO im_outbox_told (mark, at_ms) VALUES (?, ?) "
                "ON CONFLICT (mark) DO NOTHING",
                (r.once, now_ms),
            )
            if told.rowcount != 1:
                continue  # told already
        if r.held_until is not None:  # a reply handle: kept, never sent
            run(_HOLD, (r.key, r.session_id, r.kind, r.payload, now_ms, r.held_until))
            continue
        run(_INSERT, (r.key, r.session_id, r.kind, r.payload, now_ms, now_ms))


def _json(text: Any, empty: Any) -> Any:
    """A stored JSON column; ``empty`` when it cannot be read (a row damaged outside
    intermission is listed, and goes dead, rather than stopping every delivery)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return empty
    return value if isinstance(value, type(empty)) else empty


def _row(values: Any) -> OutboxRow:
    key, sid, kind, status, created, due, attempts, done, error, payload = values
    return OutboxRow(
        key=key, session_id=sid, kind=kind, status=status, created_ms=float(created),
        due_ms=float(due), attempts=int(attempts), done=tuple(map(str, _json(done, []))),
        last_error=error, payload=_json(payload, {}),
    )  # fmt: skip


class SQLOutbox:
    """``store.outbox`` of a SQL store (see :class:`~intermission.stores.outbox.Outbox`)."""

    def __init__(self, store: Any, enabled: bool | None) -> None:
        self.store = store
        self.wake = threading.Event()
        recorded = self._recorded()
        self.enabled = recorded.get("outbox") == "on" if enabled is None else enabled
        self.public_url: str | None = recorded.get("public_url")
        if enabled:
            self._record(True)

    # -- the switch, kept in the database so every process opening it follows ----------
    def _recorded(self) -> dict[str, str]:
        with self.store._tx("read") as run:
            found = run(
                "SELECT name, value FROM im_settings WHERE name IN ('outbox', 'public_url')"
            ).fetchall()
        return {str(name): str(value) for name, value in found}

    def set_public_url(self, url: str | None) -> None:
        """See :meth:`Outbox.set_public_url`."""
        _check.text("url", url, optional=True)
        with self.store._tx() as run:
            if url is None:
                run("DELETE FROM im_settings WHERE name = 'public_url'")
            else:
                run(
                    "INSERT INTO im_settings (name, value) VALUES ('public_url', ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (url,),
                )
        self.public_url = url

    def fix(self, key: str, payload: str) -> dict[str, Any] | None:
        """See :meth:`Outbox.fix` (the first to commit wins; the others read its body)."""
        from ..notify.notification import FIXED

        with self.store._tx() as run:
            run(
                "UPDATE im_outbox SET payload = ? WHERE key = ? AND payload NOT LIKE ?",
                (payload, key, FIXED + "%"),
            )
            row = run("SELECT payload FROM im_outbox WHERE key = ?", (key,)).fetchone()
        return _json(row[0], {}) if row is not None else None

    def _record(self, on: bool) -> None:
        with self.store._tx() as run:
            run(
                "INSERT INTO im_settings (name, value) VALUES ('outbox', ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                ("on" if on else "off",),
            )

    def enable(self, on: bool = True) -> None:
        """See :meth:`Outbox.enable`."""
        _check.flag("on", on)
        self._record(on)
        self.enabled = on

    def held(self, key: str) -> dict[str, Any] | None:
        """See :meth:`Outbox.held`."""
        with self.store._tx("read") as run:
            row = run(
                "SELECT payload FROM im_outbox WHERE key = ? AND status = 'held' AND due_ms >= ?",
                (key, self.now_ms()),
            ).fetchone()
        return _json(row[0], {}) if row is not None else None

    def now_ms(self) -> float:
        """The store's clock."""
        return float(self.store.clock.now_ms())

    # -- dispatchers --------------------------------------------------------------------
    def take(self, owner: str, limit: int, lease_ms: float) -> list[OutboxRow]:
        """See :meth:`Outbox.take`."""
        check_take(owner, limit, lease_ms)
        now = self.now_ms()
        lock = " FOR UPDATE SKIP LOCKED" if self.store.for_update else ""
        with self.store._tx() as run:
            run("DELETE FROM im_outbox WHERE status = 'held' AND due_ms < ?", (now,))
            found = run(
                f"SELECT {_COLUMNS} FROM im_outbox WHERE status = 'pending' AND due_ms <= ? "
                "AND (taken_until IS NULL OR taken_until < ?) ORDER BY due_ms, created_ms "
                f"LIMIT ?{lock}",
                (now, now, limit),
            ).fetchall()
            for values in found:
                run(
                    "UPDATE im_outbox SET taken_by = ?, taken_until = ? WHERE key = ?",
                    (owner, now + lease_ms, values[0]),
                )
        return [_row(v) for v in found]

    def delivered(self, key: str) -> None:
        """See :meth:`Outbox.delivered` (whoever delivered it: a dispatcher whose lease
        ran out still did)."""
        with self.store._tx() as run:
            run("DELETE FROM im_outbox WHERE key = ?", (key,))

    def release(self, key: str, owner: str) -> None:
        """See :meth:`Outbox.release`."""
        with self.store._tx() as run:
            run(
                "UPDATE im_outbox SET taken_by = NULL, taken_until = NULL "
                "WHERE key = ? AND taken_by = ?",
                (key, owner),
            )

    def failed(
        self, key: str, owner: str, error: str, done: Iterable[str], due_ms: float, dead: bool
    ) -> None:
        """See :meth:`Outbox.failed`."""
        with self.store._tx() as run:
            run(
                "UPDATE im_outbox SET status = ?, due_ms = ?, done = ?, attempts = attempts + 1, "
                "last_error = ?, taken_by = NULL, taken_until = NULL "
                "WHERE key = ? AND status = 'pending' AND taken_by = ?",
                ("dead" if dead else "pending", due_ms, json.dumps(sorted(done)), error[:500],
                 key, owner),
            )  # fmt: skip

    # -- looking and fixing ---------------------------------------------------------------
    def rows(self, status: Status | None = None, limit: int = 100) -> list[OutboxRow]:
        """See :meth:`Outbox.rows`."""
        check_rows(status, limit)
        where, params = (
            (" WHERE status != 'held'", ()) if status is None else (" WHERE status = ?", (status,))
        )
        with self.store._tx("read") as run:
            found = run(
                f"SELECT {_COLUMNS} FROM im_outbox{where} ORDER BY created_ms DESC, key LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_row(v) for v in found]

    def retry(self, key: str) -> OutboxRow:
        """See :meth:`Outbox.retry`."""
        _check.text("key", key)
        with self.store._tx() as run:
            cur = run(
                "UPDATE im_outbox SET status = 'pending', due_ms = ?, attempts = 0, "
                "taken_by = NULL, taken_until = NULL WHERE key = ? AND status != 'held'",
                (self.now_ms(), key),
            )
            if cur.rowcount != 1:
                raise NotificationNotFoundError(key)
            values = run(f"SELECT {_COLUMNS} FROM im_outbox WHERE key = ?", (key,)).fetchone()
        self.wake.set()
        return _row(values)
