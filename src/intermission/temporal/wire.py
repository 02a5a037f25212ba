"""What crosses between a surface, the Temporal server and a worker: versioned pydantic
models (never pickles), and the signature that says a surface sent them.

Anyone who can reach a Temporal frontend can send an Update with any payload, so a
decision names its person in a signed envelope: HMAC-SHA256 under a key the surfaces and the
workers share (``$INTERMISSION_TEMPORAL_KEY``, never an argument: argv is readable by every
local user). The workflow refuses a decision whose signature does not verify, whoever it
claims to be from: a person is who the surface authenticated, never a name typed into an
Update.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._json import canonical_dumps
from ..audit import AuditEntry
from ..errors import UsageError
from ..principals import Actor

__all__ = [
    "KEY_ENV",
    "WIRE_VERSION",
    "Advance",
    "Advanced",
    "Decision",
    "Decided",
    "Refusal",
    "Start",
    "State",
    "resolve_key",
    "sign",
    "verified",
]

WIRE_VERSION = 1
MIN_KEY = 16
KEY_ENV = "INTERMISSION_TEMPORAL_KEY"
"""The environment variable holding the key that signs decisions (shared by the surfaces
and the workers)."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    v: int = WIRE_VERSION


class Start(_Wire):
    """A workflow's input: run ``agent`` on a new session with ``prompt``, asked by
    ``requester`` (signed: who asked decides who may not approve, ``not_requester``)."""

    session_id: str
    agent: str
    prompt: str
    requester: Actor | None = None
    not_after_ms: float | None = None
    """The signer's clock plus a few minutes: a start read out of a history and sent again
    later is refused."""
    signature: str = ""


class Decision(_Wire):
    """One person's decision on the pause numbered ``pause`` of the workflow run ``run_id``
    (as the workflow counts them: a decision for a pause that has ended, or for another run
    under the same id, is stale and refused)."""

    session_id: str
    run_id: str
    pause: int
    verdict: Literal["approve", "reject"]
    calls: list[str] | None = None
    """Call UUIDs of the batch to decide (None: all of them, or the graph approval)."""
    reason: str | None = None
    comment: str | None = None
    actor: Actor
    signature: str = ""


class Refusal(_Wire):
    """A refused decision for the audit trail only (it decides nothing). ``nonce``: the
    workflow keeps each once, so a signal sent again adds nothing."""

    session_id: str
    run_id: str
    nonce: str
    entry: AuditEntry
    signature: str = ""


class Decided(_Wire):
    """What an accepted decision did: ``waiting`` says what a quorum still needs (nothing
    resumed); otherwise the resume it caused has ended with ``status``."""

    verdict: str
    waiting: str | None = None
    status: str
    answer: str | None = None


class Advance(_Wire):
    """The activity's input: run the session from ``snapshot`` (None: a new one for
    ``start``), no earlier than ``not_before_ms`` by the workflow's clock."""

    session_id: str
    agent: str
    snapshot: str | None = None
    start: Start | None = None
    not_before_ms: float


class Advanced(_Wire):
    """The activity's result: the session's snapshot after the run and what it noted for
    the audit trail (the workflow chains them)."""

    snapshot: str
    audit: list[AuditEntry] = Field(default_factory=list)
    status: str
    answer: str | None = None


class State(_Wire):
    """What the ``state`` query answers: the session as the workflow holds it."""

    snapshot: str | None
    run_id: str
    version: int
    pause: int
    now_ms: float
    updated_ms: float
    pending_since_ms: float | None = None
    audit_rows: list[tuple[int, str, str]] = Field(default_factory=list)
    """The audit chain as the workflow keeps it: ``(seq, text, hash)`` per record."""


def resolve_key(key: str | bytes | None = None) -> bytes:
    """The signing key: ``key``, else ``$INTERMISSION_TEMPORAL_KEY``; a UsageError when
    neither is set (a worker or surface without it could not tell people apart)."""
    found = key if key is not None else os.environ.get(KEY_ENV)
    if not found:
        raise UsageError(
            f"set {KEY_ENV} (the key that signs decisions, shared by the surfaces and the "
            "workers) in the environment of this process; it is never an argument"
        )
    data = found.encode() if isinstance(found, str) else bytes(found)
    if len(data) < MIN_KEY:
        raise UsageError(f"{KEY_ENV} is {len(data)} bytes: a signing key is at least "
                         f"{MIN_KEY} (say, openssl rand -hex 32)")  # fmt: skip
    return data


def _digest(model: _Wire, key: bytes) -> str:
    body = canonical_dumps(model.model_dump(mode="json", exclude={"signature"}))
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


START_VALID_MS = 5 * 60 * 1000.0
"""How long a signed start is good for (the signer's clock; skew between hosts included)."""


def signed_start(start: Any, key: bytes) -> Any:
    """``start`` (a :class:`Start`) good for one start within ``START_VALID_MS``, signed."""
    import time

    return sign(start.model_copy(update={"not_after_ms": time.time() * 1000 + START_VALID_MS}),
                key)  # fmt: skip


def sign(model: Any, key: bytes) -> Any:
    """``model`` with its signature."""
    return model.model_copy(update={"signature": _digest(model, key)})


def verified(model: Any, key: bytes) -> bool:
    """True when ``model``'s signature is the key's."""
    return bool(model.signature) and hmac.compare_digest(model.signature, _digest(model, key))
