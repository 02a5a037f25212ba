"""Agent versions (R62): which agent may run a session, and migrating one on purpose.

A session records the version of the agent it runs on (``.version("2")``, else the
agent's fingerprint). A paused session resumes on that version; an agent of another
version runs it only when it declares ``migrates_from(paused_version, fn)``: ``fn(session)``
then runs first, under whatever claim the caller holds, and is noted on the audit trail
(``agent.migrated``). A migration that raises leaves the session as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..audit import by_hand, note
from ..errors import AgentMigrationError, AgentMismatchError, AgentVersionError

__all__ = ["Migration", "check_owner", "migrate_session", "owner_check", "version_of"]

log = logging.getLogger("intermission.versions")

Migration = Callable[[Any], None]
"""An upcaster: changes a session paused on an older version so the newer one can run it."""


def version_of(agent: Any) -> str:
    """The version an agent runs sessions on: its declared label, else its fingerprint."""
    declared = getattr(agent, "declared_version", None)
    return declared if isinstance(declared, str) else str(getattr(agent, "fingerprint", "?"))


def owner_check(session: Any, agent: Any, *, adopt: bool = False) -> str | None:
    """Check that ``agent`` may run ``session``; return the version to migrate it from
    (None: run as it is). Raises, changing nothing: AgentMismatchError for another name
    or, within one version, other tools or policy; AgentVersionError for another version
    that ``agent`` does not migrate from. ``adopt`` hands the session over on purpose."""
    if adopt:
        return None
    name = getattr(agent, "name", None)
    recorded = getattr(session, "agent", None)
    if recorded is None:
        return None  # nobody's yet
    if recorded != name:
        raise _mismatch(session, agent)
    paused = getattr(session, "agent_version", None)
    mine = version_of(agent)
    if paused is not None and paused != mine:
        if paused in getattr(agent, "migrations", {}):
            return str(paused)
        unlabelled = paused == getattr(session, "agent_fingerprint", None)
        if not unlabelled:
            raise AgentVersionError(session.session_id, str(name), paused, [mine])
        # a session of an unlabelled version is its fingerprint's: judged by fingerprint
        # (an earlier algorithm's counts; a labelled agent with the same one takes it)
    _check_fingerprint(session, agent)
    return None


def check_owner(session: Any, agent: Any, *, adopt: bool = False) -> None:
    """Like :func:`owner_check`, for callers that cannot migrate: a session ``agent`` would
    migrate is accepted (the request that runs it migrates it first)."""
    owner_check(session, agent, adopt=adopt)


def _check_fingerprint(session: Any, agent: Any) -> None:
    """Within one version (or an unversioned session) the fingerprint must match: a
    version label is a promise about behaviour, and changed tools under an old label are
    refused. A fingerprint of an earlier release's algorithm counts for the same agent."""
    from ._base import agent_strict

    recorded_fp = getattr(session, "agent_fingerprint", None)
    mine = getattr(agent, "fingerprint", None)
    if recorded_fp is None:
        # (a strict agent — the CLI's bundled examples — takes no session whose maker it
        # cannot tell: one that ran before fingerprints were recorded. A thread a server
        # created for it, its name recorded and nothing run yet, is its own)
        if agent_strict(agent) and getattr(session, "events", None):
            raise _mismatch(session, agent)
        return
    if not isinstance(mine, str) or recorded_fp == mine:
        return
    if not agent_strict(agent) and _earlier(agent, recorded_fp):
        return
    raise _mismatch(session, agent)


def _earlier(agent: Any, recorded: str) -> bool:
    """The same definition under an earlier fingerprint algorithm (fingerprint_legacy)."""
    from .fingerprint_legacy import matches_earlier

    return matches_earlier(agent, recorded)


def _mismatch(session: Any, agent: Any) -> AgentMismatchError:
    return AgentMismatchError(
        session.session_id,
        getattr(session, "agent", None),
        getattr(session, "agent_fingerprint", None),
        str(getattr(agent, "name", None)),
        str(getattr(agent, "fingerprint", None) or "?"),
    )


def migrate_session(session: Any, agent: Any, from_version: str) -> None:
    """Run ``agent``'s migration from ``from_version`` on ``session`` and record the
    session as ``agent``'s (name, version, fingerprint), noting ``agent.migrated`` on the
    audit trail (by the principal of an enclosing ``deciding_as``). If the migration
    raises, the session is restored as it was and AgentMigrationError is raised."""
    from ..core.snapshot import restore_session, snapshot_json
    from ..hitl.deciding import default_principal
    from ..principals import actor_of

    fn = getattr(agent, "migrations", {}).get(from_version)
    to = version_of(agent)
    name = getattr(agent, "name", "?")
    if fn is None:
        raise AgentMigrationError(
            f"{name}@{to} does not migrate from version {from_version!r} (declare "
            f"agent.migrates_from({from_version!r}, fn)); nothing was changed",
            session_id=session.session_id, from_version=from_version, to_version=to,
        )  # fmt: skip
    before = snapshot_json(session)
    noted_before = len(getattr(session, "audit_noted", None) or ())
    from ..hitl.rewrite import migrating_to

    try:
        with migrating_to(agent):
            fn(session)
    except BaseException as exc:
        _restore(session, before, restore_session, noted_before)
        if not isinstance(exc, Exception):
            raise  # (a cancel or an exit is not the migration's failure)
        raise AgentMigrationError(
            f"migrating session {session.session_id!r} from {name}@{from_version} to "
            f"{name}@{to} failed: {type(exc).__name__}: {exc}; nothing was changed",
            session_id=session.session_id, from_version=from_version, to_version=to,
        ) from exc  # fmt: skip
    session.agent = name
    session.agent_version = to
    session.agent_fingerprint = getattr(agent, "fingerprint", None)
    who = actor_of(default_principal(None), via="api")
    note(session, by_hand(
        "agent.migrated", name, who, via=who.via if who else None,
        reason=f"migrated {name} {from_version} → {to}",
        detail={"agent": name, "from": from_version, "to": to},
    ))  # fmt: skip


def _restore(session: Any, text: str, restore: Any, noted_before: int) -> None:
    """Put ``session`` back as ``text`` holds it, keeping its ties to a store."""
    keep = {
        k: session.__dict__[k]
        for k in ("ledger_hook", "store_version", "clock", "ledger_dirty", "events")
        if k in session.__dict__
    }
    noted = getattr(session, "audit_noted", None)
    restore(session, text)
    session.__dict__.update(keep)
    if noted is not None:
        del noted[noted_before:]
        session.audit_noted = noted
