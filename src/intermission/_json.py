"""JSON checks and canonical encoding shared by snapshots and stores."""

from __future__ import annotations

import json
from typing import Any

from .errors import NotSerializableError

__all__ = ["canonical_dumps", "check_json"]

_SCALARS = (str, int, float, bool, type(None))


def check_json(key: str, value: Any) -> None:
    """Raise NotSerializableError naming ``key`` unless ``value`` is plain JSON data."""
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and value != value:  # NaN is not JSON
            raise NotSerializableError(key, value)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_json(f"{key}[{i}]", item)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise NotSerializableError(f"{key}.{k!r}", k)
            check_json(f"{key}.{k}", item)
        return
    raise NotSerializableError(key, value)


def canonical_dumps(data: Any) -> str:
    """Compact JSON with sorted keys: the same data always gives the same text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
