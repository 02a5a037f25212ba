"""Session stores: one contract, three backends (PostgresStore needs the ``postgres`` extra,
which it imports when it is made)."""

from .base import PendingSession, SessionStore
from .decide import DecisionOutcome, decide_and_resume
from .memory import MemoryStore
from .open import open_store
from .postgres import PostgresStore
from .sqlite import SQLiteStore
from .sweep import DeadlineSweeper, sweep_deadlines

__all__ = [
    "DeadlineSweeper",
    "DecisionOutcome",
    "MemoryStore",
    "PendingSession",
    "PostgresStore",
    "SQLiteStore",
    "SessionStore",
    "decide_and_resume",
    "open_store",
    "sweep_deadlines",
]
