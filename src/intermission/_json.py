"""JSON checks and canonical encoding shared by snapshots and stores."""

from __future__ import annotations

import json
from collections.abc import Callable
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


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _make_fast() -> Callable[[Any], str]:
    # json.dumps with keyword arguments builds a new encoder on every call, which costs
    # more than encoding a small snapshot; the C encoder is built once here. Same text as
    # _ENCODER.encode (the tests compare them); data reaching it has passed check_json.
    try:
        from _json import make_encoder  # type: ignore[import-not-found,unused-ignore]
        from json.encoder import encode_basestring
    except ImportError:  # an interpreter without the C accelerator
        return _ENCODER.encode
    if make_encoder is None or encode_basestring is None:
        return _ENCODER.encode
    encode = make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", True, False, True
    )

    def fast(data: Any) -> str:
        if isinstance(data, str):
            return _ENCODER.encode(data)
        return "".join(encode(data, 0))

    return fast


canonical_dumps: Callable[[Any], str] = _make_fast()
"""Compact JSON with sorted keys: the same data always gives the same text."""
