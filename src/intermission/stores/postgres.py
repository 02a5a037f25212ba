"""PostgresStore: the same contract on PostgreSQL (extra ``postgres``, psycopg 3), for many
kernels and workers on different machines."""

from __future__ import annotations

import re
import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._clock import Clock
from .._compat import require
from .._secrets import mask_known, passwords_in
from ..errors import StoreError, StoreUnavailableError, UsageError
from .base import DEFAULT_LEASE_MS
from .sql import SQLStore

__all__ = ["PostgresStore"]

_REFUSED = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "does not exist",
    "no pg_hba.conf entry",
    "permission denied",
    "invalid connection option",
    "invalid dsn",
    "invalid integer value",
)
"""What libpq says when the server (or the URL) refuses for good, not for now."""
_BAD_OPTION = re.compile(r"invalid \w+ value")
"""libpq on a URL option it cannot take (``sslmode=bogus``): no wait makes it right."""


_BEGIN_UNFLUSHED = "BEGIN; SET LOCAL synchronous_commit = off"
_OPEN = (2, 3)
"""libpq's PQTRANS_INTRANS and PQTRANS_INERROR: a transaction to roll back."""


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (poll: a server process's descriptors
    may be past select()'s 1024)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # (Windows: select takes sockets)


class PostgresStore(SQLStore):
    """Sessions in PostgreSQL. Claims are single conditional UPDATEs, which take the row
    lock, so two machines can never both resume one session.

    Time is the server's: claims, leases and saves are stamped and judged by PostgreSQL's
    own clock inside the statements, and ``store.clock`` (the clock of every session loaded
    or claimed here, which judges decision deadlines) reads the same time without a query
    (:class:`~intermission.stores.clock.ServerClock`). Processes whose own clocks are off
    by minutes agree on who holds a claim and whether a deadline passed. ``clock=``
    (tests) replaces the server's clock with the one given, everywhere."""

    placeholder = "%s"
    int_type = "BIGINT"
    real_type = "DOUBLE PRECISION"
    for_update = " FOR UPDATE"
    server_now = "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS DOUBLE PRECISION)"
    # the byte length of a stored text comes from its header: no read of the value itself
    length_sql = "octet_length(snapshot)"
    length_unit = "bytes"
    # appends to one session's audit chain take turns (two-key advisory locks are a key
    # space of their own: the migration's one-key lock never meets them)
    chain_lock = "SELECT pg_advisory_xact_lock(724872, hashtext(?))"
    writes_in_cte = True
    # a statement committed on its own (no BEGIN, so no SET LOCAL) skips its flush this way:
    # set_config(..., true) lasts until the end of the statement's own transaction, and a
    # row it writes has passed every condition of the WHERE, this one included
    unflushed_where = " AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
    # a session's event chunks and ledger rows read by the statement that reads its row:
    # a load is one round trip, and one snapshot (the ledger's keys and entries in the same
    # order: both by key)
    side_rows_sql = (
        "ARRAY(SELECT n FROM im_events e WHERE e.session_id = im_sessions.id ORDER BY part), "
        "ARRAY(SELECT events FROM im_events e WHERE e.session_id = im_sessions.id "
        "ORDER BY part), "
        "ARRAY(SELECT key FROM im_ledger l "
        "WHERE l.session_id = COALESCE(im_sessions.family, im_sessions.id) ORDER BY key), "
        "ARRAY(SELECT entry FROM im_ledger l "
        "WHERE l.session_id = COALESCE(im_sessions.family, im_sessions.id) ORDER BY key)"
    )

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        lease_ms: float = DEFAULT_LEASE_MS,
        heartbeat: bool = True,
        outage_s: float = 10.0,
        outbox: bool | None = None,
        connect_timeout_s: float = 5.0,
        create: bool = True,
        audit_key: str | bytes | None = None,
    ) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise UsageError("dsn is a PostgreSQL connection string (postgresql://…)")
        self.dsn = dsn
        self.connect_timeout_s = connect_timeout_s
        self._psycopg = require("psycopg", "postgres")
        self.integrity_errors = (self._psycopg.IntegrityError,)
        self.driver_errors = (self._psycopg.Error,)
        super().__init__(
            clock=clock, lease_ms=lease_ms, heartbeat=heartbeat, outage_s=outage_s,
            outbox=outbox, create=create, audit_key=audit_key,
        )  # fmt: skip

    schema_table_sql = "SELECT 1 WHERE to_regclass('im_schema') IS NOT NULL"
    columns_sql = (
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = ?"
    )

    def _where(self) -> str:
        return "the PostgreSQL database"

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            )
        except self._psycopg.ProgrammingError as exc:  # libpq could not parse the URL
            raise UsageError(
                f"the PostgreSQL URL cannot be read ({self._said(exc)}): percent-encode any "
                "of @ : / ? # % and spaces in its user and password (or give the password in "
                "PGPASSWORD or ~/.pgpass); nothing was written"
            ) from None  # (the driver's error quotes the URL, password and all)
        except self._psycopg.OperationalError as exc:
            why = self._said(exc)
            if any(marker in why for marker in _REFUSED) or _BAD_OPTION.search(why):
                # the server answered and said no: waiting for it changes nothing
                raise StoreError(
                    f"the PostgreSQL server refused the connection ({why}): check the user, "
                    "password, database name and host in the URL; nothing was written"
                ) from exc
            raise StoreUnavailableError(f"cannot connect to the PostgreSQL store ({why})") from exc

    def _said(self, exc: BaseException) -> str:
        """A driver's message on one line (libpq adds a tab and "Is the server…"), every
        password of the DSN masked wherever libpq quoted it."""
        return mask_known(" ".join(str(exc).split()), passwords_in(self.dsn))

    def _lost(self, exc: BaseException, conn: Any) -> bool:
        # a restart, a failover, pg_terminate_backend: OperationalError (AdminShutdown is
        # one), or a connection psycopg already knows is closed or broken
        if isinstance(exc, self._psycopg.OperationalError):
            return True
        return conn is not None and bool(conn.closed or getattr(conn, "broken", False))

    @contextmanager
    def _transaction(self, conn: Any, mode: str, single: bool = False) -> Iterator[None]:
        if single or mode == "query":
            # the connection commits each statement on its own: one write statement needs
            # no BEGIN and COMMIT, two round trips of the three (an unflushed one says so in
            # its own WHERE: ``unflushed_where``)
            self._check_idle(conn)
            yield
            return
        # BEGIN and COMMIT by hand rather than psycopg's transaction(), which costs more
        # Python than the round trip; an unflushed one (see Pool._transaction: committed and
        # visible at once, made durable by the next flushed commit, as the WAL flushes in
        # order) sends its SET LOCAL with the BEGIN (no parameters: one query, two statements)
        conn.execute(_BEGIN_UNFLUSHED if mode == "unflushed" else "BEGIN")
        try:
            yield
        except BaseException:
            if conn.info.transaction_status in _OPEN:  # (a lost connection: nothing to undo)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _check_idle(self, conn: Any) -> None:
        """Refuse a pooled connection the server has spoken on while it sat idle: that is
        its goodbye (a restart, ``pg_terminate_backend``), which a BEGIN would have met. A
        statement sent on it would fail, a write with an unknown outcome; refused here,
        nothing was sent, so the pool takes another connection (Tx.__enter__)."""
        if _readable(conn.fileno()):
            raise self._psycopg.OperationalError("the server closed the idle connection")

    def _migrate(self) -> None:
        # serialise schema creation and upgrades between processes starting at the same
        # time: the lock is the transaction's, so the second opener waits for the first
        # one's commit and then reads the version it recorded (no migration runs twice)
        with self._tx() as run:
            run("SELECT pg_advisory_xact_lock(724871)")
            self._check_exists(run)
            run("CREATE TABLE IF NOT EXISTS im_schema (version INTEGER NOT NULL)")
            row = run("SELECT MAX(version) FROM im_schema").fetchone()
            self._apply_migrations(run, row[0] if row and row[0] is not None else 0)
            self._read_server_clock(run)

    @staticmethod
    def text_length(text: str) -> int:
        """The length of a snapshot in UTF-8 bytes, as ``octet_length`` counts it."""
        return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))

    def __repr__(self) -> str:
        return "PostgresStore(<dsn>)"
