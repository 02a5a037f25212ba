"""SQLiteStore: the embedded default (stdlib sqlite3, WAL)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

from .._check import shown
from .._clock import Clock
from ..errors import StoreError, UsageError
from .base import DEFAULT_LEASE_MS
from .sql import SQLStore

__all__ = ["SQLiteStore"]


class SQLiteStore(SQLStore):
    """Sessions in one SQLite file, shared by threads and processes on one machine.

    Example:
        >>> store = SQLiteStore(":memory:")
        >>> store.pending()
        []
    """

    integrity_errors = (sqlite3.IntegrityError,)
    driver_errors = (sqlite3.Error,)
    returning = sqlite3.sqlite_version_info >= (3, 35)
    # PostgreSQL caps an index entry at about 2.7 kB, which a task list could pass; SQLite
    # has no such cap, so its pending indexes carry every column pending() returns
    cover = ", agent, reason, tasks, deadline_ms, request"

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Clock | None = None,
        lease_ms: float = DEFAULT_LEASE_MS,
        heartbeat: bool = True,
        outage_s: float = 10.0,
        outbox: bool | None = None,
        create: bool = True,
        audit_key: str | bytes | None = None,
    ) -> None:
        if not isinstance(path, (str, Path)) or not str(path):
            raise UsageError(f"path is a file path (or ':memory:'), not {shown(path)}")
        if synchronous not in ("FULL", "NORMAL"):
            raise UsageError(f"synchronous is 'FULL' or 'NORMAL', not {shown(synchronous)}")
        self.path = str(path)
        if self.path != ":memory:" and Path(self.path).is_dir():
            # sqlite says "disk I/O error" or "unable to open database file" for a folder
            raise StoreError(
                f"{self.path!r} is a directory, not a SQLite store: name a file in it "
                "(say store.sqlite)"
            )
        if create is False and self.path != ":memory:":
            _check_holds_store(self.path)
        self.synchronous = synchronous
        self._memory_conn: sqlite3.Connection | None = None
        self._memory_lock = threading.Lock()
        super().__init__(
            clock=clock, lease_ms=lease_ms, heartbeat=heartbeat, outage_s=outage_s,
            outbox=outbox, create=create, audit_key=audit_key,
        )  # fmt: skip

    def _connect(self) -> Any:
        if self.path == ":memory:":
            # one shared connection: each :memory: connection would be its own database
            if self._memory_conn is None:
                self._memory_conn = self._open()
            return self._memory_conn
        return self._open()

    def _where(self) -> str:
        return f"the SQLite file {self.path!r}"

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=60.0, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:  # a missing folder, no permission, not a database
            raise StoreError(f"cannot open the SQLite store {str(self.path)!r}: {exc}") from exc
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return conn

    def _lost(self, exc: BaseException, conn: Any) -> bool:
        # locked past the busy timeout, or the file went away: the database is unavailable.
        # A file this process may not write is no outage: waiting for it changes nothing
        return isinstance(exc, sqlite3.OperationalError) and not _read_only(exc)

    def _migration_outage(self, exc: BaseException) -> bool:
        # SQLite reports a missing index or a duplicate column as an OperationalError too:
        # only a busy, locked, unreadable or full database is an outage there (and a file
        # this process may not write keeps its own error, see _mapped)
        if _read_only(exc):
            return True
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF in _OUTAGE_CODES
        return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)

    def _mapped(self, exc: BaseException, conn: Any, *, committing: bool) -> StoreError:
        if not _read_only(exc):
            return super()._mapped(exc, conn, committing=committing)
        if conn is not None:
            self._give_back(conn)
        return StoreError(
            f"the SQLite store {self.path!r} cannot be written ({exc}): nothing was written; "
            "make the file and its folder writable for this user, then try again"
        )

    def _discard(self, conn: Any) -> None:
        if conn is self._memory_conn:
            super()._give_back(conn)  # the shared :memory: connection *is* the database
            return
        super()._discard(conn)

    def _transaction(self, conn: Any, mode: str, single: bool = False) -> _SQLiteTransaction:
        # (``single`` changes nothing here: BEGIN and COMMIT cost no round trip in-process)
        lock = self._memory_lock if conn is self._memory_conn else None
        return _SQLiteTransaction(conn, mode, lock, self.synchronous)

    def explain_pending(self, limit: int = 50, agent: str | None = None) -> list[str]:
        """``EXPLAIN QUERY PLAN`` of :meth:`pending` (details only)."""
        sql, params = self.pending_query(limit, agent, None)
        with self._tx() as run:
            return [str(r[-1]) for r in run("EXPLAIN QUERY PLAN " + sql, params).fetchall()]

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"


_OUTAGE_CODES = frozenset({5, 6, 10, 13, 14})
"""SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN."""


def _read_only(exc: BaseException) -> bool:
    """Whether SQLite refused a write because the file (or its folder) is read-only."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return isinstance(code, int) and code & 0xFF == 8  # SQLITE_READONLY, extended codes too
    return isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc)


def _check_holds_store(path: str) -> None:
    """StoreError unless ``path`` is a SQLite file holding a store. Read only: opening the
    store proper would turn an empty file into a database (WAL mode writes its header)."""
    if not Path(path).exists():
        raise StoreError(
            f"there is no SQLite store at {path!r} (no such file); nothing was created"
        )
    try:
        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'im_schema'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:  # not a database, no permission
        raise StoreError(f"cannot open the SQLite store {path!r}: {exc}") from exc
    if found is None:
        raise StoreError(
            f"the SQLite file {path!r} holds no intermission store; nothing was created"
        )


class _SQLiteTransaction:
    """IMMEDIATE takes the write lock up front, so check-then-write steps cannot interleave
    between processes; reads take no lock (WAL readers see a snapshot) and a single query
    needs no transaction at all. The shared :memory: connection also needs a lock between
    threads."""

    __slots__ = ("conn", "lock", "mode", "synchronous")

    def __init__(self, conn: sqlite3.Connection, mode: str, lock: Any, synchronous: str) -> None:
        self.conn = conn
        self.mode = mode
        self.lock = lock
        self.synchronous = synchronous

    def __enter__(self) -> None:
        if self.lock is not None:
            self.lock.acquire()
        mode = self.mode
        if mode == "query":
            return
        try:
            if mode == "unflushed":
                # Committed without fsync: in WAL mode the commit is still atomic and visible
                # to every other connection at once; only a power cut can lose it, and the
                # next synchronous commit's fsync of the log takes it along. NORMAL, not
                # OFF: a checkpoint this commit runs still syncs (OFF could corrupt).
                self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("BEGIN" if mode == "read" else "BEGIN IMMEDIATE")
        except BaseException:
            self._finish()
            raise

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            if self.mode == "query":
                return
            if kind is not None:
                self.conn.execute("ROLLBACK")
                return
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                # never hand an open transaction back to the pool
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        finally:
            self._finish()

    def _finish(self) -> None:
        try:
            if self.mode == "unflushed":
                self.conn.execute(f"PRAGMA synchronous={self.synchronous}")
        finally:
            if self.lock is not None:
                self.lock.release()
