"""How every view names the decider of an expiry: the deadline (a decision nobody made),
never "an unnamed reviewer". An expiry is recorded timed out with no reviewer (a policy's
``on_expire``, by the sweeper or whoever meets the session first), or as
``system:deadline`` by the resume that rejects a task past its deadline."""

from __future__ import annotations

from ..principals import label
from .graph import DEADLINE_REVIEWER

__all__ = ["THE_DEADLINE", "by_deadline", "decider"]

THE_DEADLINE = "the deadline"
"""The decider of an expiry, as views name it: ``REJECT by the deadline at …``."""


def by_deadline(reviewer: str | None, timed_out: bool = False) -> bool:
    """True for a decision the deadline took (an expiry)."""
    return bool(timed_out) or reviewer == DEADLINE_REVIEWER


def decider(reviewer: str | None, display: str | None = None, timed_out: bool = False) -> str:
    """Who decided, for people: the deadline for an expiry, else the reviewer (with the
    name they typed, when it differs), else "an unnamed reviewer"."""
    if by_deadline(reviewer, timed_out):
        return THE_DEADLINE
    return label(reviewer, display) or "an unnamed reviewer"
