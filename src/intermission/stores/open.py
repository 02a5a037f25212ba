"""Open a store from a path or URL (used by the CLI and by cross-process tests)."""

from __future__ import annotations

import re
from typing import Any

from .._check import shown
from ..errors import UsageError
from .base import SessionStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["open_store"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# libpq's keyword form (``host=db password=… dbname=app``): not a file name (a SQLite file
# named after it, password and all, was created before)
_KEYWORDS = re.compile(
    r"(?i)(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|sslmode|service)\s*="
)


def open_store(target: str, **options: Any) -> SessionStore:
    """Open a session store named by a URL or a file path.

    ``postgresql://…`` → PostgresStore, ``temporal://HOST:PORT/NAMESPACE`` → the sessions
    running as Temporal workflows (extra ``temporal``), ``memory:`` → MemoryStore, else a
    SQLite file (``sqlite:///path`` or a plain path). Another URL scheme (``mysql://…``) is a
    UsageError, and so is a libpq keyword string (``host=… password=…``). ``create=False``:
    open only a store that exists (see SQLiteStore). ``audit_key=``: the key of the audit
    chain (else ``$INTERMISSION_AUDIT_KEY``; see :mod:`intermission.audit`).

    Example:
        ```python
        from intermission import InMemoryAgentSession
        from intermission.examples import build_ops_agent
        from intermission.stores import open_store

        store = open_store("app.sqlite")  # a SQLite file; "memory:" or a postgresql:// URL alike
        session = InMemoryAgentSession.of("s-1")
        build_ops_agent().prompt("Please delete user 1001").session(session).call()  # pauses
        store.save(session)
        print(type(store).__name__, [p.session_id for p in store.pending()])
        #> SQLiteStore ['s-1']
        store.close()
        ```
    """
    if not isinstance(target, str) or not target:
        raise UsageError(f"a store is a file path or a URL, not {shown(target)}")
    if target.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(target, **options)
    if target.startswith("temporal://"):  # (extra ``temporal``; imported only here)
        from ..temporal.store import TemporalStore

        options.pop("create", None)  # (a workflow makes its session: nothing to create)
        return TemporalStore(target, **options)
    if target == "memory:":
        options.pop("create", None)  # (a memory store is always new)
        return MemoryStore(**options)
    scheme = _SCHEME.match(target)
    if scheme is not None and not target.startswith("sqlite:///"):
        raise UsageError(
            f"{scheme.group(1)}:// is not a store intermission knows: give a SQLite file "
            "path (or sqlite:///path), a postgresql:// URL, or memory:"
        )
    if _KEYWORDS.search(target) and not target.startswith("sqlite:///"):
        raise UsageError(
            "the store is a libpq keyword string (host=… dbname=…), not a path or URL: "
            "give PostgreSQL as a postgresql://USER@HOST:5432/DBNAME URL (the password after "
            "USER: in it, percent-encoded: @ : / % # as %40 %3A %2F %25 %23), or a SQLite "
            "file as sqlite:///path"
        )

    path = target.removeprefix("sqlite:///") if target.startswith("sqlite:///") else target
    return SQLiteStore(path, **options)
