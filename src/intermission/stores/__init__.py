"""Session stores: one contract, three backends (the Postgres one needs the extra and is
imported as ``intermission.stores.postgres``)."""

from .base import PendingSession, SessionStore
from .memory import MemoryStore
from .open import open_store
from .sqlite import SQLiteStore

__all__ = ["MemoryStore", "PendingSession", "SQLiteStore", "SessionStore", "open_store"]
