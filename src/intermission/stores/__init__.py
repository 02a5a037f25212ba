"""Session stores: one contract, three backends (PostgresStore needs the ``postgres`` extra,
which it imports when it is made)."""

from .base import PendingSession, SessionStore
from .memory import MemoryStore
from .open import open_store
from .postgres import PostgresStore
from .sqlite import SQLiteStore

__all__ = [
    "MemoryStore",
    "PendingSession",
    "PostgresStore",
    "SQLiteStore",
    "SessionStore",
    "open_store",
]
