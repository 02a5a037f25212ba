"""JSON checks and canonical encoding shared by snapshots and stores."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from ._check import shown
from .errors import NotSerializableError, UsageError
from .limits import MAX_DEPTH as _MAX_DEPTH
from .limits import MAX_TEXT_BYTES as _MAX_TEXT

__all__ = [
    "canonical_dumps",
    "check_json",
    "check_key",
    "check_text",
    "escape_surrogates",
    "loads",
    "may_hold_surrogate",
    "surrogate_key_path",
]

_SCALARS = (str, int, float, bool, type(None))
_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def check_text(what: str, text: str, *, allow_nul: bool = True) -> None:
    """Refuse text no store can keep as a key: lone surrogates (not Unicode text, e.g. an
    ``os.fsdecode`` file name) and, unless ``allow_nul``, NUL characters (PostgreSQL text
    cannot hold them). Values inside JSON documents are stored escaped instead."""
    if text.isascii():
        if allow_nul or "\x00" not in text:
            return
        raise UsageError(f"{what} {shown(text)} holds a NUL character, which no store keeps")
    if _SURROGATE.search(text):
        raise UsageError(
            f"{what} {shown(text)} holds a lone surrogate (not Unicode text); decode bytes "
            "with errors='replace' or keep them as base64"
        )
    if not allow_nul and "\x00" in text:
        raise UsageError(f"{what} {shown(text)} holds a NUL character, which no store keeps")


def escape_surrogates(text: str) -> str:
    """``text`` (JSON) with every lone surrogate written as its JSON escape: the same
    JSON value, now encodable as UTF-8 (what every store writes)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pair = _PAIR.search(text)
        if pair is not None:  # JSON would read the two back as one character
            raise NotSerializableError(f"text {pair.group()!r}", pair.group()) from None
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def check_json(key: str, value: Any, depth: int = 0) -> None:
    """Raise NotSerializableError naming ``key`` unless ``value`` is plain JSON data (NaN
    and infinities are not JSON) nested at most ``MAX_DEPTH`` deep."""
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and not math.isfinite(value):
            raise NotSerializableError(key, value)
        return
    if depth >= _MAX_DEPTH:
        raise NotSerializableError(key, value, f"nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_json(f"{key}[{i}]", item, depth + 1)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise NotSerializableError(f"{key}.{shown(k)}", k)
            check_key(key, k)
            check_json(f"{key}.{k}", item, depth + 1)
        return
    raise NotSerializableError(key, value)


def check_key(where: str, key: str) -> None:
    """Refuse a key no snapshot keeps: one with a lone surrogate (kept faithfully in
    values, but not as keys: pydantic cannot write them), as NotSerializableError."""
    if not key.isascii() and _SURROGATE.search(key):
        raise NotSerializableError(f"{where}.{shown(key)}", key, "a key with a lone surrogate")


def may_hold_surrogate(text: str) -> bool:
    r"""False when the JSON ``text`` surely holds no lone surrogate (a quick scan: an
    escape ``\udXXX`` or the character itself; a false alarm only costs a walk)."""
    if "\\ud" in text or "\\uD" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def surrogate_key_path(text: str, data: Any) -> str | None:
    """Where ``data`` (parsed from the JSON ``text``) has an object key with a lone
    surrogate (a key pydantic cannot write back), or None. The text is scanned first, so
    the walk only happens when such a character can be there at all."""
    if not may_hold_surrogate(text):
        return None
    stack: list[tuple[str, Any]] = [("", data)]  # (a loop, not recursion: any depth)
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
                    return f"{path}.{shown(key)}".lstrip(".")
                stack.append((f"{path}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}", item) for i, item in enumerate(value))
    return None


def loads(text: Any, what: str, *, limit: int = _MAX_TEXT) -> Any:
    """Parse JSON text (``str``/``bytes``) no larger than ``limit`` (``MAX_TEXT_BYTES``
    unless the caller checked its own limit); anything that is not JSON (too deep for the
    parser, ``NaN``, bad bytes) raises ``ValueError`` with ``what`` in the message, for
    the caller to turn into its typed error."""
    if len(text) > limit:
        raise ValueError(f"{what} is larger than {limit} bytes")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _make_fast() -> Callable[[Any], str]:
    # json.dumps with keyword arguments builds a new encoder on every call, which costs
    # more than encoding a small snapshot; the C encoder is built once here. Same text as
    # _ENCODER.encode (the tests compare them); data reaching it has passed check_json.
    try:
        from _json import make_encoder  # type: ignore[import-not-found,unused-ignore]
        from json.encoder import encode_basestring
    except ImportError:  # an interpreter without the C accelerator
        return lambda data: escape_surrogates(_ENCODER.encode(data))
    if make_encoder is None or encode_basestring is None:
        return lambda data: escape_surrogates(_ENCODER.encode(data))
    encode = make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", True, False, False
    )

    def fast(data: Any) -> str:
        if isinstance(data, str):
            return escape_surrogates(_ENCODER.encode(data))
        return escape_surrogates("".join(encode(data, 0)))

    return fast


_fast = _make_fast()


def canonical_dumps(data: Any) -> str:
    """Compact JSON with sorted keys: the same data always gives the same text. Lone
    surrogates are escaped (so every store can write the text) and come back unchanged;
    NaN, infinities and objects that are not JSON raise NotSerializableError."""
    try:
        return _fast(data)
    except (ValueError, TypeError, RecursionError) as exc:
        raise NotSerializableError("value", data, f"not JSON: {exc}") from None
