"""Argument checks for public entry points: hostile or mistaken input gets a UsageError that
names the argument and says what it takes, before anything changes (R42)."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import UsageError

__all__ = ["count", "flag", "function", "number", "shown", "text"]

T = TypeVar("T")

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 4


def shown(value: Any) -> str:
    """A short repr of any value for an error message: bounded in depth and length, and
    never failing (a hostile value's own ``__repr__`` may raise or recurse)."""
    try:
        return _REPR.repr(value)
    except Exception:  # a __repr__ that raises
        return f"<{type(value).__name__}>"


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
        raise UsageError(f"{name} is a whole number from {lo} to {hi}, not {shown(value)}")
    if not lo <= value <= hi:
        raise UsageError(f"{name} is a whole number from {lo} to {hi}, not {shown(value)}")
    return value


def number(name: str, value: Any, lo: float, hi: float, *, optional: bool = False) -> Any:
    """A finite int or float in ``[lo, hi]`` (or None when ``optional``)."""
    if value is None and optional:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    # (an int is finite however large; math.isfinite would overflow converting it)
    if not ok or (isinstance(value, float) and not math.isfinite(value)) or not lo <= value <= hi:
        raise UsageError(f"{name} is a finite number from {lo:g} to {hi:g}, not {shown(value)}")
    return value


def flag(name: str, value: Any) -> bool:
    """A bool (not any truthy value: ``pending("no")`` must not pause)."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} is True or False, not {shown(value)}")
    return value


def function(name: str, value: Any, *, optional: bool = False) -> Callable[..., Any] | None:
    """A callable (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not callable(value):
        raise UsageError(f"{name} is a function, not {type(value).__name__}")
    return value  # type: ignore[no-any-return]
