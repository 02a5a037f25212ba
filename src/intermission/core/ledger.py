"""Ledger entries of ``session.once``: exactly-once external effects (R32)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["LedgerEntry"]


class LedgerEntry(BaseModel):
    """One idempotency key: ``started`` before the effect, then ``completed`` or ``failed``.

    An entry left at ``started`` means the process died mid-effect: its outcome is unknown.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True, frozen=True)

    status: Literal["started", "completed", "failed"]
    result: Any = None
    error: str | None = None
    started_ms: float
    ended_ms: float | None = None

    def completed(self, result: Any, now_ms: float) -> LedgerEntry:
        """This entry, completed with ``result``."""
        return self.model_copy(update={"status": "completed", "result": result, "ended_ms": now_ms})

    def failed(self, error: str, now_ms: float) -> LedgerEntry:
        """This entry, failed with ``error`` (a later ``once`` runs the effect again)."""
        return self.model_copy(update={"status": "failed", "error": error, "ended_ms": now_ms})
