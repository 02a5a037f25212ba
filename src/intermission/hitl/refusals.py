"""Refused decisions in the audit trail: who tried what, and why it was refused.

A refused decision changes no session snapshot. Its entry is noted on the session (written
by its next save, if any) and kept on the error (``error.audit``), so that a surface with a
store at hand writes it at once with :func:`write_refusal` — the read copy it judged is
never saved.
"""

from __future__ import annotations

import logging
from typing import Any

from ..audit import AuditEntry, note
from ..principals import Actor, nameless_via

__all__ = ["refusal", "refusal_entry", "write_refusal"]

log = logging.getLogger("intermission.audit")


def refusal_entry(
    error: BaseException,
    actor: Actor | None,
    target: str | None,
    verdict: str,
    *,
    kind: str | None = None,
) -> AuditEntry:
    """The audit entry of ``actor``'s ``verdict`` on ``target``, refused with ``error``
    (``kind``: the error's type name, when ``error`` is a surface's own refusal)."""
    return AuditEntry(
        action="decision.refused",
        actor=actor.name if actor is not None else None,
        roles=list(actor.roles) if actor is not None else [],
        via=actor.via if actor is not None else nameless_via(),
        authenticated=bool(actor is not None and actor.authenticated),
        target=target,
        reason=str(error)[:2000],
        detail={
            "verdict": verdict,
            "error": kind or type(error).__name__,
            **({"rule": rule} if isinstance(rule := getattr(error, "rule", None), str) else {}),
            **({"display": actor.display} if actor is not None and actor.display else {}),
        },
    )


def refusal(
    session: Any, error: BaseException, actor: Actor | None, target: str | None, verdict: str
) -> None:
    """Note why ``actor``'s ``verdict`` on ``target`` was refused, on ``session`` and on
    ``error`` (``error.audit``). Never raises: the refusal is what the caller reports."""
    try:
        entry = refusal_entry(error, actor, target, verdict)
        note(session, entry)
        error.audit = entry  # type: ignore[attr-defined]
    except Exception:  # (a session that takes no notes): the refusal stands as it is
        log.warning("could not note a refused decision", exc_info=True)


def write_refusal(store: Any, session_id: str, error: BaseException) -> bool:
    """Write the refusal noted on ``error`` to ``store``'s audit trail, where the store
    keeps one (``append_audit``); True when written. A failing write is logged, never
    raised: the decision was refused either way, and the caller reports that refusal."""
    entry = getattr(error, "audit", None)
    append = getattr(store, "append_audit", None)
    if entry is None or append is None:
        return False
    try:
        append(session_id, [entry])
    except Exception:
        log.warning("the audit entry of a refused decision on %r was not written", session_id,
                    exc_info=True)  # fmt: skip
        return False
    return True
