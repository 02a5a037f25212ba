"""Secrets left out of what a notification shows: by the name of the field that holds a
value, and by the shape of the value itself, at any depth.

A tool's arguments, a reason, a comment come from models and people; a notification goes
to places (a chat channel, a mailbox, a receiver's logs) that must never hold a password.
Two checks, each enough on its own:

- a **name** that says secret (case-insensitive, in any spelling: ``DB_PASSWORD``,
  ``apiKey``, ``x-access-key``, ``sshKeyPath``): the value is ``[redacted]``, whatever it is;
- a **value shaped like a secret**, under any name or inside longer text: URL userinfo
  (``postgresql://app:pw@db`` → ``postgresql://***@db``), well-known token prefixes
  (``sk_live_``, ``sk-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``AKIA…``, ``glpat-``, …),
  JWTs (``eyJ….….…``), ``Bearer …`` and PEM private-key blocks become ``[redacted]``, and
  so does the value of a ``NAME=value`` or ``NAME: value`` inside text whose name says
  secret (``PGPASSWORD=hunter2 psql``, ``?token=abc``).

What is not caught: a secret under an innocent name with no recognisable shape (a bare
random string in ``note``). Send fewer arguments for such tools:
``on_tool(name, notify_args=False)`` or ``notify_args=["env"]``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "redact", "redact_text", "secret_name", "userinfo_masked"]

REDACTED = "[redacted]"

# names: compared with every separator and case dropped (``Api-Key`` → ``apikey``)
_NAME_PARTS = (
    "password", "passwd", "passphrase", "pwd", "secret", "token", "apikey", "accesskey",
    "privatekey", "sshkey", "clientkey", "secretkey", "signingkey", "encryptionkey",
    "masterkey", "sessionkey", "jwt", "bearer", "authorization", "cookie",
    "dsn", "credential", "signature", "databaseurl", "connectionstring", "connstr",
)  # fmt: skip
# ...and short words that say secret only as a whole word (``otp``, not ``footprint``;
# ``auth``, not ``author``; a lone ``session`` is a cookie's name, ``session_id`` an id a
# reviewer needs to see)
_NAME_WORDS = frozenset({"pw", "pin", "otp", "pat", "mfa", "totp", "sig", "salt", "creds", "auth"})
_WHOLE_NAMES = frozenset({"session", "sid"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def secret_name(name: object) -> bool:
    """Whether a field called ``name`` holds a secret (``DB_PASSWORD``, ``apiKey``,
    ``x-access-key``, ``ssh_key``, ``jwt``, ``dsn``, …)."""
    text = str(name)
    flat = re.sub(r"[^a-z0-9]", "", text.lower())
    if any(part in flat for part in _NAME_PARTS) or flat in _WHOLE_NAMES:
        return True
    return any(w.lower() in _NAME_WORDS for w in _WORDS.findall(text))


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@\"'<>]+@")
_SHAPES = re.compile(
    "|".join((
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY"
        r"( BLOCK)?-----|\Z)",
        r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{4,}",  # (distinctive: glued to text too)
        r"\bsk-[A-Za-z0-9_\-]{8,}",
        r"\bgh[pousr]_[A-Za-z0-9]{8,}",
        r"github_pat_[A-Za-z0-9_]{8,}",
        r"\bxox[abposr]-[A-Za-z0-9\-]{6,}",
        r"\bxapp-[A-Za-z0-9\-]{6,}",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{12,}",
        r"glpat-[A-Za-z0-9_\-]{8,}",
        r"\bnpm_[A-Za-z0-9]{16,}",
        r"\bpypi-[A-Za-z0-9_\-]{16,}",
        r"\bAIza[0-9A-Za-z_\-]{20,}",
        r"\beyJ[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*",
        r"\b(?i:bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]{6,}",
    )),
    re.DOTALL,
)  # fmt: skip


# ``NAME=value`` / ``NAME: value`` inside text (a command line, a query string, a config
# pasted in a comment): the value goes when the name says secret
_ASSIGNED = re.compile(
    r"""\b([A-Za-z_][A-Za-z0-9_.\-]*)(["']?\s*[=:](?!//)\s*)("[^"]*"|'[^']*'|[^\s,;&"'}<>]+)"""
)


def _assigned(match: re.Match[str], depth: int = 0) -> str:
    name, sep, value = match.groups()
    if secret_name(name):
        return f"{name}{sep}{REDACTED}"
    if "=" not in value and ":" not in value:
        return match.group(0)
    # the value may hold an assignment of its own (``note: PGPASSWORD=pw``, ``a=b=pw``);
    # a chain deeper than any text a person writes is redacted whole
    if depth >= 8:
        return f"{name}{sep}{REDACTED}"
    return name + sep + _ASSIGNED.sub(lambda m: _assigned(m, depth + 1), value)


def userinfo_masked(text: str) -> str:
    """``text`` with the user and password of every URL in it written as ``***``
    (``postgresql://app:pw@db/x`` → ``postgresql://***@db/x``)."""
    return _USERINFO.sub(r"\1***@", text)


def redact_text(text: str) -> str:
    """``text`` with every secret-shaped part replaced (URL userinfo by ``***``, tokens,
    JWTs, PEM private keys by ``[redacted]``)."""
    if "://" in text:
        text = userinfo_masked(text)
    text = _SHAPES.sub(REDACTED, text)
    if "=" in text or ":" in text:
        text = _ASSIGNED.sub(_assigned, text)
    return text


def redact(value: Any) -> Any:
    """``value`` (JSON-like data) with secrets replaced at any depth: the value of every
    field whose name says secret, and every secret-shaped string (keys included)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            redact_text(str(k)): REDACTED if secret_name(k) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value
