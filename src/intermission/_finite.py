"""Non-finite numbers (inf, -inf, nan) are never a tool's argument.

JSON has no such numbers, yet they arrive: Python's ``json`` reads ``Infinity`` and
``NaN``, and a string of a thousand nines is ``inf`` to ``float()``. A tool's own
validation (``Tool.validate``) and the schema check of edited arguments (``_schema``)
both refuse them through :func:`non_finite`, so what one accepts the other accepts too.
Dependency-free.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["FINITE_ONLY", "non_finite"]

FINITE_ONLY = "must be a finite number (inf, -inf and nan are no tool argument)"

_MAX_DEPTH = 64


def non_finite(value: Any, path: str = "") -> str | None:
    """The path (``ids.2``, ``args`` for the value itself) of the first non-finite number
    in ``value`` — looking into dicts, lists, tuples, sets and pydantic models — or None."""
    if not _any(value, 0):  # (the common case, checked without building paths)
        return None
    return _find(value, path, 0)


_PLAIN = (str, int, bytes, type(None))


def _any(value: Any, depth: int) -> bool:
    """True when ``value`` holds a non-finite number anywhere (see :func:`_find`)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, _PLAIN) or depth > _MAX_DEPTH:
        return False
    if isinstance(value, dict):
        value = value.values()
    elif isinstance(value, Decimal):
        return not value.is_finite()
    elif not isinstance(value, (list, tuple, set, frozenset)):
        fields = getattr(type(value), "model_fields", None)
        if not isinstance(fields, dict):
            return False
        value = [getattr(value, name, None) for name in fields]
    for item in value:
        if _any(item, depth + 1):
            return True
    return False


def _find(value: Any, path: str, depth: int) -> str | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "args")
    if isinstance(value, Decimal):
        return None if value.is_finite() else (path or "args")
    if depth > _MAX_DEPTH or isinstance(value, (str, bytes, int)):
        return None
    if isinstance(value, dict):
        items: Any = ((str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(value))
    elif isinstance(value, (set, frozenset)):
        items = (("item", v) for v in value)
    else:
        fields = getattr(type(value), "model_fields", None)  # a pydantic model's values
        if not isinstance(fields, dict):
            return None
        items = ((name, getattr(value, name, None)) for name in fields)
    for key, item in items:
        found = _find(item, f"{path}.{key}" if path else key, depth + 1)
        if found is not None:
            return found
    return None
