"""PostgresStore: the same contract on PostgreSQL (extra ``postgres``, psycopg 3), for many
kernels and workers on different machines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._clock import Clock
from .._compat import require
from ..errors import StoreError
from .base import DEFAULT_LEASE_MS
from .sql import SQLStore

__all__ = ["PostgresStore"]


class PostgresStore(SQLStore):
    """Sessions in PostgreSQL. Claims are single conditional UPDATEs, which take the row
    lock, so two machines can never both resume one session."""

    placeholder = "%s"
    int_type = "BIGINT"
    real_type = "DOUBLE PRECISION"

    def __init__(
        self, dsn: str, *, clock: Clock | None = None, lease_ms: float = DEFAULT_LEASE_MS
    ) -> None:
        self.dsn = dsn
        self._psycopg = require("psycopg", "postgres")
        self.integrity_errors = (self._psycopg.IntegrityError,)
        super().__init__(clock=clock, lease_ms=lease_ms)

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.dsn, autocommit=True)
        except self._psycopg.OperationalError as exc:  # (the message never holds a password)
            raise StoreError(f"cannot connect to the PostgreSQL store: {exc}") from exc

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
