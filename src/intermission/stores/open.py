"""Open a store from a path or URL (used by the CLI and by cross-process tests)."""

from __future__ import annotations

from typing import Any

from .base import SessionStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["open_store"]


def open_store(target: str, **options: Any) -> SessionStore:
    """``postgresql://…`` → PostgresStore, ``memory:`` → MemoryStore, else a SQLite file
    (``sqlite:///path`` or a plain path)."""
    if target.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(target, **options)
    if target == "memory:":
        return MemoryStore(**options)
    path = target.removeprefix("sqlite:///") if target.startswith("sqlite:///") else target
    return SQLiteStore(path, **options)
