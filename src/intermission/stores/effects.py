"""Sessions stuck on an effect of unknown outcome, resolved by a person.

An effect of ``session.once`` that started and never recorded how it ended (its process
was killed mid-effect, or the write of its end was lost) is never run again on a guess:
every resume stops at it with EffectOutcomeUnknownError. ``store.stuck()`` lists such
sessions; a person checks the external system and records what happened, under the
session's claim, from Python (:func:`resolve_unknown_effect`), the CLI (``python -m
intermission resolve|forget``) or the reviewer console. The session is then resumable: a
resolved effect returns the recorded result, a forgotten one runs again.

An effect a person approved (a gated tool call, or a graph node's effect after the
graph's approval) is judged by that approval's policy
(R60, see :mod:`intermission.hitl.unknown_outcome`): only a principal who could have
approved it resolves or forgets it, and forgetting reopens the approval, so the effect
runs again only after a fresh decision. A refusal changes nothing and is on the audit
trail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, get_args

from .. import _check
from .._json import check_json
from ..audit import Via
from ..core.session import InMemoryAgentSession
from ..errors import (
    DecisionRefusedError,
    EffectNotReopenableError,
    NothingToResolveError,
    SessionNotFoundError,
    UsageError,
)
from ..hitl.refusals import write_refusal
from ..principals import actor_of
from .base import SessionStore, claim_token

__all__ = ["RESOLVED_KEY", "resolve_unknown_effect"]

RESOLVED_KEY = "effects.resolved"
"""The context key keeping who resolved which effect, how and when (a list, oldest first)."""

_UNSET: Any = object()


def resolve_unknown_effect(
    store: SessionStore,
    session_id: str,
    key: str,
    *,
    result: Any = _UNSET,
    forget: bool = False,
    reviewer: str | None = None,
    via: Via = "api",
    principal: Any = None,
) -> InMemoryAgentSession:
    """Record, under the session's claim, what a person found out about effect ``key`` of
    unknown outcome: it happened, with ``result`` (JSON), or (``forget=True``) it did not,
    so the next resume runs it again. Refused with NothingToResolveError unless the store
    holds the effect as started and never ended; with SessionBusyError while someone holds
    the claim (the effect may be running right now). Returns the session as saved.

    Who: ``principal`` (an authenticated :class:`~intermission.Principal`), else
    ``reviewer`` as asserted; audited as ``effect.resolved`` / ``effect.forgotten``
    through ``via``. An approved effect is judged by the policy of the approval that
    authorised it (ReviewerNotAllowedError, nothing changed, the refusal audited), and
    ``forget`` reopens that approval (EffectNotReopenableError when the session no longer
    holds it open)."""
    if not hasattr(store, "claim"):
        raise UsageError(f"resolve_unknown_effect takes a store, not {type(store).__name__}")
    _check.text("key", key)
    _check.text("reviewer", reviewer, optional=True)
    if via not in get_args(Via):
        raise UsageError(f"via is one of {', '.join(get_args(Via))}, not {via!r}")
    _check.flag("forget", forget)
    if forget == (result is not _UNSET):
        raise UsageError("give either result= (the effect happened) or forget=True (it did not)")
    if not forget:
        check_json(f"result of effect {key!r}", result)
    try:
        return _resolve(store, session_id, key, result, forget, reviewer, via, principal)
    except (DecisionRefusedError, EffectNotReopenableError) as exc:
        write_refusal(store, session_id, exc)  # (the claim is released: nothing was saved)
        raise


def _resolve(
    store: SessionStore, session_id: str, key: str, result: Any, forget: bool,
    reviewer: str | None, via: Via, principal: Any,
) -> InMemoryAgentSession:  # fmt: skip
    with store.claim(session_id) as s, ExitStack() as also:
        entry = s.ledger.get(key)
        if entry is None or entry.status != "started":
            raise NothingToResolveError(session_id, key, None if entry is None else entry.status)
        if entry.by is not None and entry.by != session_id:
            # a fork sharing the ledger started it: its claim's holder may be running it
            # right now (SessionBusyError), so its claim is held too while this is recorded
            also.enter_context(_held(store, entry.by))
        # audited with the ledger write itself (effect.resolved / effect.forgotten: who,
        # through which surface); an approved effect is judged by its approval's policy
        # there, and forgetting it reopens that approval (R60)
        # (a Principal passed in Python is vouched for by its caller, as in HITL.submit)
        who = reviewer if principal is None else actor_of(principal, via=via, display=reviewer)
        if forget:
            s.forget_effect(key, principal=who, via=via)
        else:
            s.resolve_effect(key, result, principal=who, via=via)
        done = s.ledger[key]
        name = reviewer if principal is None else principal.name
        display = getattr(principal, "display", None) or reviewer
        record = {
            "key": key, "outcome": "forgotten" if forget else "completed",
            "reviewer": name, "via": via, "time_ms": done.ended_ms,
        }  # fmt: skip
        if display and display != name:  # a name the person typed beside who they are
            record["display"] = display
        s.context.put(RESOLVED_KEY, [*(s.context.get(RESOLVED_KEY) or []), record])
    return s


@contextmanager
def _held(store: SessionStore, session_id: str) -> Iterator[None]:
    """Hold the claim of ``session_id`` (SessionBusyError while someone else does), and
    release it unchanged; a session deleted meanwhile runs nothing."""
    take, release = getattr(store, "_take", None), getattr(store, "_release", None)
    if not callable(take) or not callable(release):  # another make of store: its own claim
        with ExitStack() as stack:
            try:
                stack.enter_context(store.claim(session_id))
            except SessionNotFoundError:
                pass
            yield
        return
    token = claim_token()
    try:
        take(session_id, token, False)
    except SessionNotFoundError:
        yield
        return
    try:
        yield
    finally:
        release(session_id, token)
