"""Slack's request signature (``v0``): ``X-Slack-Signature: v0=<hex>``, the HMAC-SHA256 of
``v0:{X-Slack-Request-Timestamp}:{raw body}`` keyed by the Slack app's signing secret
(https://api.slack.com/authentication/verifying-requests-from-slack)."""

from __future__ import annotations

import hashlib
import hmac

from ..errors import IntermissionError

__all__ = ["WINDOW_S", "SlackSignatureError", "StaleRequestError", "sign", "verify"]

WINDOW_S = 300
"""How old (or how far ahead) a request's timestamp may be, in seconds."""


class SlackSignatureError(IntermissionError):
    """A request Slack did not sign (no signature, a wrong one, no timestamp): 401."""


class StaleRequestError(SlackSignatureError):
    """A signed request whose timestamp is outside the 5-minute window (a replay, or a
    clock far off): nothing is done."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` Slack sends for ``body`` at ``timestamp``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify(
    secrets: dict[str, str], timestamp: str | None, signature: str | None, body: bytes,
    now_s: float,
) -> str:  # fmt: skip
    """The name of the target whose signing secret signed ``body`` (``secrets``: name →
    secret). Raises :class:`SlackSignatureError` (no or a wrong signature) or, for a
    well-signed request outside the window around ``now_s`` (the store's clock),
    :class:`StaleRequestError`. Signatures are compared in constant time."""
    if not timestamp or not signature or not timestamp.isascii() or not timestamp.isdigit():
        raise SlackSignatureError("the request is not signed by Slack")
    found = None
    for name, secret in secrets.items():  # (every one compared: no early exit to time)
        if hmac.compare_digest(sign(secret, timestamp, body).encode(), signature.encode()):
            found = name
    if found is None:
        raise SlackSignatureError("the request's Slack signature does not match")
    if abs(now_s - int(timestamp)) > WINDOW_S:
        raise StaleRequestError(
            "this click reached intermission more than 5 minutes after Slack sent it (or "
            "the clocks differ): nothing was done; click again"
        )
    return found
