"""The session-state errors (``SessionStateError`` and its subclasses: nothing to resume,
a request in progress, an effect of unknown outcome, a mismatched or unserved agent version),
apart so ``errors.py`` stays one screenful per family; import them from
:mod:`intermission.errors`, which re-exports them."""

from __future__ import annotations

from ._error_base import IntermissionError

__all__ = [
    "AgentMigrationError",
    "AgentMismatchError",
    "AgentVersionError",
    "EffectNotReopenableError",
    "EffectOutcomeUnknownError",
    "NothingToResolveError",
    "NothingToResumeError",
    "RequestInProgressError",
    "SessionStateError",
]


class SessionStateError(IntermissionError):
    """The session is not in a state that allows the request."""

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        self.session_id = session_id
        super().__init__(message)


class NothingToResumeError(SessionStateError):
    """An empty ``prompt()`` asked to continue, but the run already ended.

    From a store: ``status`` is the stored session's status and ``last_decision`` its last
    decision (``"APPROVE by alice at …"``), when known."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        status: str | None = None,
        last_decision: str | None = None,
    ) -> None:
        self.status = status
        self.last_decision = last_decision
        super().__init__(message, session_id=session_id)


class RequestInProgressError(SessionStateError):
    """A request was made on a session object that is still running another one.

    Say a second ``call_async`` started before the first finished: it is refused before it
    changes anything. Two resumers in different processes are kept apart by a store's
    claim instead (:class:`SessionBusyError`).
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"a request is already running on session {session_id!r}; wait for it to end "
            "(nothing was changed)",
            session_id=session_id,
        )


class EffectOutcomeUnknownError(SessionStateError):
    """An effect of ``session.once`` was started (maybe elsewhere) and never recorded as finished.

    It may or may not have happened, so it is not run again. Tools do not turn this into an
    observation; it stops the run for a human to check."""

    def __init__(self, key: str, *, session_id: str | None = None) -> None:
        self.key = key
        super().__init__(
            f"effect {key!r} started but its completion was never recorded (a crash, or "
            "another process); check the external system, then call "
            "session.resolve_effect(key, result) or session.forget_effect(key) (or, from a "
            "terminal: python -m intermission resolve SESSION KEY --result JSON, or forget "
            "SESSION KEY)",
            session_id=session_id,
        )


class NothingToResolveError(SessionStateError):
    """An effect to resolve or forget is not of unknown outcome.

    It never started, or it already completed or failed (``status``: what the ledger holds,
    None when it holds nothing). Nothing was changed."""

    def __init__(self, session_id: str, key: str, status: str | None) -> None:
        self.key = key
        self.status = status
        held = f"is {status}" if status else "was never started"
        super().__init__(
            f"effect {key!r} of session {session_id!r} {held}, not of unknown outcome: there "
            "is nothing to resolve and nothing was changed (`python -m intermission show "
            "SESSION` lists its effects)",
            session_id=session_id,
        )


class EffectNotReopenableError(SessionStateError):
    """Forgetting an approved effect of unknown outcome was refused: it would run again.

    The stored session no longer holds the effect's approval open (the run had gone past
    it): forgetting would run the effect again without a fresh decision, so it is refused
    and nothing was changed (R60); also when a fork sharing the ledger ran it (``ran_by``):
    it is forgotten there. ``key``: the effect; ``call_uuid``: the approval that authorised
    it."""

    def __init__(
        self, session_id: str, key: str, call_uuid: str, *, ran_by: str | None = None
    ) -> None:
        self.key = key
        self.call_uuid = call_uuid
        where = (
            f"session {ran_by!r} ran it under its own approval: forget it there"
            if ran_by is not None
            else "the session no longer holds that approval open: forgetting it would run it "
            "again without a fresh decision; check the external system and record its "
            "result with `python -m intermission resolve`"
        )
        super().__init__(
            f"effect {key!r} of session {session_id!r} was authorised by the approval of "
            f"call {call_uuid!r}; {where}. Nothing was changed",
            session_id=session_id,
        )


class AgentMismatchError(SessionStateError):
    """A session was asked to run with an agent other than the one that made it.

    The agent has another name, or the same name with other tools, tool arguments or
    approval policy (its fingerprint). Nothing was changed. ``recorded`` /
    ``recorded_fingerprint``: the session's agent; ``agent`` / ``fingerprint``: the one
    refused. To hand the session to the new agent on purpose, adopt it:
    ``agent.prompt().session(s).adopt().call()`` (CLI: ``--adopt``)."""

    def __init__(
        self,
        session_id: str,
        recorded: str | None,
        recorded_fingerprint: str | None,
        agent: str,
        fingerprint: str,
    ) -> None:
        self.recorded = recorded
        self.recorded_fingerprint = recorded_fingerprint
        self.agent = agent
        self.fingerprint = fingerprint
        theirs = f"agent {recorded!r}" if recorded is not None else "another agent"
        if recorded_fingerprint is not None:
            theirs += f" (fingerprint {recorded_fingerprint})"
        what = "another name" if recorded not in (None, agent) else "other tools or policy"
        super().__init__(
            f"session {session_id!r} belongs to {theirs}, not to agent {agent!r} "
            f"(fingerprint {fingerprint}: {what}); nothing was changed. Run it with the "
            "agent that made it, or hand it over on purpose with "
            "agent.prompt().session(s).adopt() (CLI: --adopt)",
            session_id=session_id,
        )


class AgentVersionError(AgentMismatchError):
    """A paused session's agent version is not served here, and no served version migrates it.

    Raised before any of the session's code runs (R62); nothing was changed and its approval
    stays open. ``paused``: the session's version; ``served``: the versions of its agent
    name at hand (oldest first)."""

    def __init__(self, session_id: str, agent: str, paused: str | None, served: list[str]) -> None:
        self.paused = paused
        self.served = list(served)
        shown_served = ", ".join(f"{agent}@{v}" for v in served) or "none"
        message = (
            f"session {session_id!r} paused on {agent}@{paused or '?'}, which is not served "
            f"here (served: {shown_served}) and no served version migrates it; nothing was "
            f"changed. Serve {agent}@{paused or '?'} until its sessions drain, or register "
            f"agent.migrates_from({paused!r}, fn) on a newer version"
        )
        SessionStateError.__init__(self, message, session_id=session_id)
        self.recorded = agent
        self.recorded_fingerprint = None
        self.agent = agent
        self.fingerprint = "?"


class AgentMigrationError(SessionStateError):
    """An agent migration failed, or no migration starts from the session's version.

    A migration (``agent.migrates_from(version, fn)``) raised, or was asked for a
    version nothing migrates from. The session is exactly as it was (the store's row
    byte-identical); ``from_version`` / ``to_version`` name the step."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        from_version: str | None = None,
        to_version: str | None = None,
    ) -> None:
        self.from_version = from_version
        self.to_version = to_version
        super().__init__(message, session_id=session_id)


# users meet them as ``intermission.errors.X`` (tracebacks, repr, pickling), as before the move
for _cls in (
    SessionStateError,
    NothingToResumeError,
    RequestInProgressError,
    EffectOutcomeUnknownError,
    NothingToResolveError,
    EffectNotReopenableError,
    AgentMismatchError,
    AgentVersionError,
    AgentMigrationError,):
    _cls.__module__ = "intermission.errors"
