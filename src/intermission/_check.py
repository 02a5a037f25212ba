"""Argument checks for public entry points: hostile or mistaken input gets a UsageError that
names the argument and says what it takes, before anything changes (R42)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import UsageError

__all__ = ["count", "flag", "function", "number", "text"]

T = TypeVar("T")


def text(name: str, value: Any, *, optional: bool = False, empty: bool = True) -> Any:
    """A string (or None when ``optional``); NUL and lone surrogates are left to the
    places that store keys (see ``_json.check_text``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        kind = "text or None" if optional else "text"
        raise UsageError(f"{name} is {kind}, not {type(value).__name__}")
    if not empty and not value:
        raise UsageError(f"{name} is a non-empty string")
    return value


def count(name: str, value: Any, lo: int, hi: int) -> int:
    """An int in ``[lo, hi]`` (bools are refused: ``True`` is not a count)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{name} is a whole number from {lo} to {hi}, not {value!r}")
    if not lo <= value <= hi:
        raise UsageError(f"{name} is a whole number from {lo} to {hi}, not {value!r}")
    return value


def number(name: str, value: Any, lo: float, hi: float, *, optional: bool = False) -> Any:
    """A finite int or float in ``[lo, hi]`` (or None when ``optional``)."""
    if value is None and optional:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        raise UsageError(f"{name} is a finite number from {lo:g} to {hi:g}, not {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    """A bool (not any truthy value: ``pending("no")`` must not pause)."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} is True or False, not {value!r}")
    return value


def function(name: str, value: Any, *, optional: bool = False) -> Callable[..., Any] | None:
    """A callable (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not callable(value):
        raise UsageError(f"{name} is a function, not {type(value).__name__}")
    return value  # type: ignore[no-any-return]
