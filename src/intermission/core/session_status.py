"""The session status lifecycle (shared by sessions, snapshots and stores)."""

from __future__ import annotations

from typing import Literal

__all__ = ["SessionStatus"]

SessionStatus = Literal["new", "running", "pending", "paused", "done", "failed"]
"""new: never ran · running: a request is in flight · pending: parked by ``pending(True)``,
waiting for a request (usually a human decision) · paused: stopped by a step budget or an
interrupt, resumable without a decision · done: the last run finished · failed: it raised."""
