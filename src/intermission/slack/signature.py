"""Slack's request signature (``v0``): ``X-Slack-Signature: v0=<hex>``, the HMAC-SHA256 of
``v0:{X-Slack-Request-Timestamp}:{raw body}`` keyed by the Slack app's signing secret
(https://api.slack.com/authentication/verifying-requests-from-slack)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import IntermissionError

__all__ = [
    "SLACK_REPLIES",
    "WINDOW_S",
    "SlackSignatureError",
    "StaleRequestError",
    "button_mac",
    "origin",
    "reply_allowed",
    "sign",
    "verify",
]

SLACK_REPLIES = "https://hooks.slack.com"
"""Where Slack's ``response_url`` always points."""

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
) -> frozenset[str]:  # fmt: skip
    """The names of the targets whose signing secret signed ``body`` (``secrets``: name →
    secret; one Slack app has one secret and often several targets, a webhook per
    channel). Raises :class:`SlackSignatureError` (no or a wrong signature) or, for a
    well-signed request outside the window around ``now_s`` (the store's clock),
    :class:`StaleRequestError`. Signatures are compared in constant time."""
    if not timestamp or not signature or not timestamp.isascii() or not timestamp.isdigit():
        raise SlackSignatureError("the request is not signed by Slack")
    found = frozenset(name for name, secret in secrets.items()  # (every one compared)
                      if hmac.compare_digest(sign(secret, timestamp, body).encode(),
                                             signature.encode()))  # fmt: skip
    if not found:
        raise SlackSignatureError("the request's Slack signature does not match")
    if abs(now_s - int(timestamp)) > WINDOW_S:
        raise StaleRequestError(
            "this click reached intermission more than 5 minutes after Slack sent it (or "
            "the clocks differ): nothing was done; click again"
        )
    return found


def button_mac(secret: str, target: str, session_id: str, interrupt_id: str,
               action: str, shown: str) -> str:  # fmt: skip
    """The tag an interactive button's value carries: an HMAC (keyed from the app's signing
    secret) over what it decides and how. Slack signs every click on any message of the
    app, including one posted by whoever holds its incoming-webhook URL; the tag is what
    says intermission made this button, for this interrupt, as this action (so an Approve
    is only ever one intermission offered: never on arguments it could not show whole).

    ``shown``: the :func:`binding` of the call the message showed (its tool, arguments and
    when it was asked), kept out of the value and computed again from the session at the
    click: a model may give a later call of the thread the same id (``call_0``), and an old
    message's Approve must not decide a call it never showed."""
    key = hmac.new(secret.encode(), b"intermission/slack-button/v2", hashlib.sha256).digest()
    what = json.dumps([target, session_id, interrupt_id, action, shown], separators=(",", ":"))
    return hmac.new(key, what.encode(), hashlib.sha256).hexdigest()[:32]


def binding(tool: str | None, args: Mapping[str, Any], asked_ms: float | None) -> str:
    """What a button is bound to (see :func:`button_mac`'s ``shown``): the tool, the
    arguments the message showed and when the call was asked for (a model may give a later
    request's call the same id, the same tool and the same arguments: it is another
    call); a graph approval's request (its id names its pause already)."""
    from ..decisions import fingerprint

    return fingerprint({"tool": tool, "args": dict(args), "asked": asked_ms})


def made_before_binding(secret: str, target: str, session_id: str, interrupt_id: str,
                        action: str, mac: str) -> bool:
    """Whether ``mac`` is the tag an earlier release gave a button (over the ids and the
    action only, not the call shown): such a button decides nothing now — it could decide
    a later call given the same id — and its click is told to open the approval instead."""
    key = hmac.new(secret.encode(), b"intermission/slack-button/v1", hashlib.sha256).digest()
    what = json.dumps([target, session_id, interrupt_id, action], separators=(",", ":"))
    made = hmac.new(key, what.encode(), hashlib.sha256).hexdigest()[:32]
    return hmac.compare_digest(made.encode(), mac.encode("utf-8", "replace"))


def origin(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url`` (lower case, default port left out); None for
    a URL with credentials, a backslash or no host (parsers disagree on where it goes)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("https", "http") or not parts.hostname or "@" in parts.netloc \
            or "\\" in url or not url.isprintable() or " " in url:  # fmt: skip
        return None
    default = {"https": 443, "http": 80}[parts.scheme]
    shown_port = "" if port in (None, default) else f":{port}"
    return f"{parts.scheme}://{parts.hostname.lower()}{shown_port}"


def reply_allowed(url: str, origins: Iterable[str]) -> bool:
    """Whether intermission may POST to ``url``, a click's ``response_url``: only to
    ``origins`` (Slack's, and the interactive target's own webhook host). The URL comes in
    the request body: posting wherever it says would let a forged or leaked signature
    send the server's requests anywhere (its own network included)."""
    found = origin(url) if isinstance(url, str) else None
    return found is not None and found in set(origins)
