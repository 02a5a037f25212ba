"""Session stores: one contract, three backends (PostgresStore needs the ``postgres`` extra,
which it imports when it is made)."""

from .._store_errors import StoreMigrationError, StoreSchemaError
from .base import (
    PendingPage,
    PendingSession,
    SessionStore,
    StuckSession,
    UnreadableSession,
    VersionCount,
)
from .decide import DecisionOutcome, decide_and_resume
from .effects import resolve_unknown_effect
from .memory import MemoryStore
from .open import open_store
from .postgres import PostgresStore
from .sqlite import SQLiteStore
from .sweep import DeadlineSweeper, sweep_deadlines

__all__ = [
    "DeadlineSweeper",
    "DecisionOutcome",
    "MemoryStore",
    "PendingPage",
    "PendingSession",
    "PostgresStore",
    "SQLiteStore",
    "SessionStore",
    "StoreMigrationError",
    "StoreSchemaError",
    "StuckSession",
    "UnreadableSession",
    "VersionCount",
    "decide_and_resume",
    "open_store",
    "resolve_unknown_effect",
    "sweep_deadlines",
]
