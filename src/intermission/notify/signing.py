"""How a webhook proves it came from us: HMAC-SHA256 over the timestamp and the body.

Headers of every webhook request::

    Idempotency-Key: ntf_…                   the notification's key (the same on retries)
    Intermission-Timestamp: 1764590400       when this attempt was signed (Unix seconds)
    Intermission-Signature: v1=<hex>         HMAC-SHA256(secret, timestamp + "." + body)

A receiver recomputes the signature over the raw body bytes, compares it in constant
time, refuses a timestamp more than five minutes away from its own clock (a captured
request cannot be replayed later), and refuses an ``Idempotency-Key`` header that is not
the signed body's ``key`` (the header is not signed: a captured request sent again with a
fresh key would pass a receiver's de-duplication), or any of these three headers sent
twice. Each attempt is signed anew; the body, and its ``key``, stay the same.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping

from .._check import shown
from ..errors import UsageError

__all__ = [
    "KEY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TOLERANCE_S",
    "sign",
    "verify",
]

KEY_HEADER = "Idempotency-Key"
TIMESTAMP_HEADER = "Intermission-Timestamp"
SIGNATURE_HEADER = "Intermission-Signature"
TOLERANCE_S = 300
"""How far a signed timestamp may be from the receiver's clock (seconds)."""


def _secret(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def sign(secret: str | bytes, timestamp: str, body: bytes) -> str:
    """The ``Intermission-Signature`` value for ``body`` signed at ``timestamp``."""
    mac = hmac.new(_secret(secret), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(
    secret: str | bytes,
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance_s: float = TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """True when ``headers`` carry a valid signature of ``body`` made within
    ``tolerance_s`` of ``now`` (Unix seconds; the local clock by default) and an
    ``Idempotency-Key`` that is the signed body's ``key``. Header names are matched
    case-insensitively."""
    if not isinstance(secret, (str, bytes)) or not isinstance(body, (bytes, bytearray)):
        raise UsageError("verify takes the secret (str or bytes) and the raw body (bytes)")
    if not isinstance(headers, Mapping) and not hasattr(headers, "items"):
        raise UsageError(f"headers is a mapping of header names to values, not {shown(headers)}")
    items = [(str(k).lower(), v) for k, v in headers.items()]
    lower = dict(items)
    # a header sent twice (a fresh key before the signed one) is refused: a receiver's
    # ``headers.get`` takes the first, a dict of the items the last
    if len(items) != len(lower) and any(
        [k for k, _ in items].count(name.lower()) > 1
        for name in (KEY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
    ):
        return False
    stamp = lower.get(TIMESTAMP_HEADER.lower(), "")
    given = lower.get(SIGNATURE_HEADER.lower(), "")
    if not isinstance(stamp, str) or not isinstance(given, str):
        return False
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12 or not given:
        return False
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance_s:
        return False
    if not given.isascii():
        return False
    try:
        if not hmac.compare_digest(sign(secret, stamp, bytes(body)), given):
            return False
    except UnicodeEncodeError:  # a secret no encoding can carry signs nothing
        return False
    return _key_signed(bytes(body), lower.get(KEY_HEADER.lower()))


def _key_signed(body: bytes, header: object) -> bool:
    """Whether the ``Idempotency-Key`` header is the key the signed body carries."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    key = data.get("key") if isinstance(data, dict) else None
    return isinstance(key, str) and isinstance(header, str) and key == header  # (no secret)
