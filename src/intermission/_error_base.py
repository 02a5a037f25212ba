"""The base of intermission's errors (:mod:`intermission.errors` draws the tree)."""

from __future__ import annotations

__all__ = ["IntermissionError"]


class IntermissionError(Exception):
    """Base of every error intermission raises on purpose."""

    __module__ = "intermission.errors"
