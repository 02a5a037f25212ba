"""PostgresStore: the same contract on PostgreSQL (extra ``postgres``, psycopg 3), for many
kernels and workers on different machines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._clock import Clock
from .._compat import require
from ..errors import StoreUnavailableError, UsageError
from .base import DEFAULT_LEASE_MS
from .sql import SQLStore

__all__ = ["PostgresStore"]


class PostgresStore(SQLStore):
    """Sessions in PostgreSQL. Claims are single conditional UPDATEs, which take the row
    lock, so two machines can never both resume one session."""

    placeholder = "%s"
    int_type = "BIGINT"
    real_type = "DOUBLE PRECISION"
    for_update = " FOR UPDATE"
    # appends to one session's audit chain take turns (two-key advisory locks are a key
    # space of their own: the migration's one-key lock never meets them)
    chain_lock = "SELECT pg_advisory_xact_lock(724872, hashtext(?))"

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        lease_ms: float = DEFAULT_LEASE_MS,
        heartbeat: bool = True,
        outage_s: float = 10.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise UsageError("dsn is a PostgreSQL connection string (postgresql://…)")
        self.dsn = dsn
        self.connect_timeout_s = connect_timeout_s
        self._psycopg = require("psycopg", "postgres")
        self.integrity_errors = (self._psycopg.IntegrityError,)
        self.driver_errors = (self._psycopg.Error,)
        super().__init__(clock=clock, lease_ms=lease_ms, heartbeat=heartbeat, outage_s=outage_s)

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            )
        except self._psycopg.OperationalError as exc:  # (the message never holds a password)
            raise StoreUnavailableError(
                f"cannot connect to the PostgreSQL store ({str(exc).strip()})"
            ) from exc

    def _lost(self, exc: BaseException, conn: Any) -> bool:
        # a restart, a failover, pg_terminate_backend: OperationalError (AdminShutdown is
        # one), or a connection psycopg already knows is closed or broken
        if isinstance(exc, self._psycopg.OperationalError):
            return True
        return conn is not None and bool(conn.closed or getattr(conn, "broken", False))

    @contextmanager
    def _transaction(self, conn: Any, mode: str) -> Iterator[None]:
        with conn.transaction():
            if mode == "lease":  # a claim need not wait for the WAL flush (see SQLStore.resume)
                conn.execute("SET LOCAL synchronous_commit = off")
            yield

    def _migrate(self) -> None:
        # serialise schema creation between processes starting at the same time
        with self._tx() as run:
            run("SELECT pg_advisory_xact_lock(724871)")
            run("CREATE TABLE IF NOT EXISTS im_schema (version INTEGER NOT NULL)")
            row = run("SELECT MAX(version) FROM im_schema").fetchone()
            self._apply_migrations(run, row[0] if row and row[0] is not None else 0)

    def __repr__(self) -> str:
        return "PostgresStore(<dsn>)"
