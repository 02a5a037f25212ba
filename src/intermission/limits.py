"""The limits every entry point enforces (R42), so hostile input is refused with a typed
error instead of exhausting memory or the interpreter's stack.

- ``MAX_DEPTH``: how deeply JSON values may nest in a session (context values, tool
  arguments, effect results) and in graph files (subgraphs nest too).
- ``MAX_EVENTS`` / ``MAX_MESSAGES``: the largest event log and chat history a session may
  be asked to keep (``max_events`` / ``max_messages``).
- ``MAX_TEXT_BYTES``: the largest graph document a loader reads.
- ``MAX_SNAPSHOT_TEXT``: the largest snapshot, in characters of JSON (event log
  included): every store refuses to save a larger one and every loader (``restore``,
  ``put_snapshot``) to read one, with ``SnapshotTooLargeError`` (R50). A quarter of
  PostgreSQL's 1 GB field, so that even four-byte characters fit a column.
"""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "MAX_EVENTS",
    "MAX_MESSAGES",
    "MAX_PAGE",
    "MAX_SNAPSHOT_TEXT",
    "MAX_TEXT_BYTES",
]

MAX_DEPTH = 100
MAX_EVENTS = 1_000_000
MAX_MESSAGES = 100_000
MAX_TEXT_BYTES = 64 * 1024 * 1024
MAX_SNAPSHOT_TEXT = 256 * 1024 * 1024
MAX_PAGE = 10_000
"""The largest page ``store.pending(limit=…)`` returns."""
