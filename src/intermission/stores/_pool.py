"""Connections of the SQL stores: a small pool, one transaction at a time per connection,
and driver errors turned into StoreErrors. A connection the server dropped (a restart, a
failover, ``pg_terminate_backend``) is discarded, never handed out again; a pooled one
found dead when a transaction begins is replaced at once, since nothing ran on it (R40)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .._secrets import mask_url
from ..errors import StoreClosedError, StoreError, StoreUnavailableError

__all__ = ["Pool", "Tx", "until_back"]

T = TypeVar("T")


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        pass


class Pool:
    """The connection plumbing of :class:`~intermission.stores.sql.SQLStore`; subclasses
    give the driver hooks."""

    placeholder = "?"
    driver_errors: tuple[type[BaseException], ...] = ()
    """Every error the driver raises (mapped to StoreError subclasses)."""

    def __init__(self) -> None:
        self._idle: list[Any] = []
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self._out: dict[int, int] = {}
        """How many transactions hold each connection (by id): close() never closes one
        under a running statement — another thread's sqlite3 call would crash the process."""

    # -- driver hooks ------------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    def _transaction(self, conn: Any, mode: str, single: bool = False) -> Any:
        """A context manager around one transaction. ``mode``: ``write`` (takes the write
        lock, durable), ``unflushed`` (a write committed and visible to everyone at once that
        does not wait for its flush to disk: the next flushed commit makes it durable, since
        the log is flushed in order — for a claim, whose loss in a power cut is harmless, and
        for what must be durable only before an effect runs, whose start is flushed),
        ``read``, ``query`` (one statement, no transaction). ``single``: the body's first
        statement is its only write (what follows it only reads), so a server that commits
        each statement on its own may skip BEGIN and COMMIT (PostgresStore)."""
        raise NotImplementedError

    def _lost(self, exc: BaseException, conn: Any) -> bool:
        """True when ``exc`` means the connection (or the database) is gone."""
        return False

    # -- the pool ----------------------------------------------------------------------
    def _borrow(self) -> tuple[Any, bool]:
        """A connection and whether it is new. A small pool rather than one connection per
        thread: short-lived threads (a click handler, a worker) leave none behind."""
        with self._conns_lock:
            if self._closed:  # never connect again: that would re-create a deleted file
                raise StoreClosedError(repr(self))
            if self._idle:
                conn = self._idle.pop()
                self._out[id(conn)] = self._out.get(id(conn), 0) + 1
                return conn, False
        conn = self._connect()
        with self._conns_lock:
            self._conns.append(conn)
            self._out[id(conn)] = self._out.get(id(conn), 0) + 1
        return conn, True

    def _count_back(self, conn: Any) -> bool:
        """Count a borrowed connection back (under the lock); True when nobody holds it."""
        left = self._out.get(id(conn), 0) - 1
        if left > 0:
            self._out[id(conn)] = left
            return False
        self._out.pop(id(conn), None)
        return True

    def _give_back(self, conn: Any) -> None:
        with self._conns_lock:
            free = self._count_back(conn)
            if not self._closed:
                if conn in self._conns:
                    self._idle.append(conn)
                return
            if not free or conn not in self._conns:
                return
            # closed while this transaction ran: its connection closes now, after it
            self._conns = [c for c in self._conns if c is not conn]
        _close(conn)

    def _discard(self, conn: Any) -> None:
        with self._conns_lock:
            self._count_back(conn)
            self._conns = [c for c in self._conns if c is not conn]
            self._idle = [c for c in self._idle if c is not conn]
        _close(conn)

    def close(self) -> None:
        """Close every connection this store opened: idle ones now, one that a
        transaction in another thread holds as soon as that transaction ends. Any later
        use raises StoreClosedError."""
        with self._conns_lock:
            self._closed = True
            held = {key for key, n in self._out.items() if n > 0}
            conns = [c for c in self._conns if id(c) not in held]
            self._conns = [c for c in self._conns if id(c) in held]
            self._idle = []
        for conn in {id(c): c for c in conns}.values():
            _close(conn)

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _tx(self, mode: str = "write", *, single: bool = False) -> Tx:
        """``with store._tx(mode) as run: run(sql, params)`` — one transaction on a pooled
        connection (modes and ``single`` as in :meth:`_transaction`)."""
        return Tx(self, mode, single)

    @property
    def _errors(self) -> tuple[type[BaseException], ...]:
        # text a driver cannot encode (a lone surrogate) is refused by the database too
        return (*self.driver_errors, UnicodeEncodeError)

    def _mapped(self, exc: BaseException, conn: Any, *, committing: bool) -> StoreError:
        """The StoreError for a driver error. ``conn`` (None: already discarded) is
        discarded when it is lost, else handed back to the pool."""
        lost = self._lost(exc, conn)
        why = f"{type(exc).__name__}: {mask_url(str(exc))}"  # (a URL it quotes: no password)
        if conn is not None:
            if lost:
                self._discard(conn)
            else:
                self._give_back(conn)
        if lost:
            return StoreUnavailableError(
                f"the database connection was lost ({why})".strip(),
                outcome_unknown=committing,
            )
        return StoreError(f"the database refused the operation: {why}")


class Tx:
    """One transaction on a pooled connection. A class rather than nested generator
    context managers: every save and resume passes through here, and the generator
    machinery cost more than the SQL of a small commit."""

    __slots__ = ("conn", "cur", "inner", "mode", "single", "store")

    def __init__(self, store: Pool, mode: str, single: bool = False) -> None:
        self.store = store
        self.mode = mode
        self.single = single

    def __enter__(self) -> Callable[..., Any]:
        store = self.store
        while True:
            conn, fresh = store._borrow()
            try:
                inner = store._transaction(conn, self.mode, self.single)
                inner.__enter__()
            except BaseException as exc:
                if not isinstance(exc, store.driver_errors):
                    store._discard(conn)  # interrupted mid-BEGIN: not fit for reuse
                    raise
                if not fresh and store._lost(exc, conn):
                    # died while idle in the pool, nothing ran on it; after a restart every
                    # pooled one did: the next, until a new connection is the one tried
                    store._discard(conn)
                    continue
                raise store._mapped(exc, conn, committing=False) from exc
            break
        self.conn, self.inner = conn, inner
        self.cur = conn.cursor()
        return self.run if store.placeholder == "?" else self.run_translated

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.cur
        cur.execute(sql, params)
        return cur

    def run_translated(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.cur
        cur.execute(self.store._sql(sql), params)
        return cur

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        store, conn = self.store, self.conn
        errors = store._errors
        try:
            self.inner.__exit__(kind, exc, tb)  # commit, or roll back after an error
        except BaseException as err:
            # the commit or the rollback failed: the connection's state is unknown
            store._discard(conn)
            if kind is not None:  # the body failed first: that is the error to report
                if isinstance(exc, errors):
                    raise store._mapped(exc, None, committing=False) from exc
                return
            if isinstance(err, errors):
                raise store._mapped(err, None, committing=True) from err
            raise
        if kind is not None and isinstance(exc, errors):
            # (a single write is its own commit: lost mid-statement, it may have committed)
            raise store._mapped(exc, conn, committing=self.single) from exc
        store._give_back(conn)


def until_back(
    attempt: Callable[[], T], outage_s: float, check: Callable[[], T | None] | None = None
) -> T:
    """``attempt()``, tried again while the database is unavailable, for up to
    ``outage_s`` seconds (writes that must not be lost: a ledger entry for an effect that
    ran, the save that ends a resume). ``check()`` runs before each retry and returns a
    result when the failed attempt turns out to have committed after all."""
    deadline = time.monotonic() + outage_s
    pause = 0.05
    for _ in _forever():
        try:
            return attempt()
        except StoreUnavailableError:
            if time.monotonic() + pause > deadline:
                raise
        # the attempt may have committed: ask until the database answers, and attempt
        # again only once it said no (attempted blind, a save that did commit would meet
        # its own new version and report a conflict)
        while True:
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
            if check is None:
                break
            try:
                done = check()
            except StoreUnavailableError:
                if time.monotonic() + pause > deadline:
                    raise
                continue
            if done is not None:
                return done
            break
    raise AssertionError("unreachable")  # pragma: no cover


def _forever() -> Iterator[None]:
    while True:
        yield None
