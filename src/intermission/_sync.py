"""Run the async core from sync code: see ``_concurrency`` (threads on CPython, the event
loop in a browser). Kept so the core's imports stay as they are."""

from __future__ import annotations

from ._concurrency import run_sync

__all__ = ["run_sync"]
