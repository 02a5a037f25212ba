"""The store's errors (``StoreError`` and its subclasses), apart so ``errors.py`` stays one
screenful per family; import them from :mod:`intermission.errors`, which re-exports them."""

from __future__ import annotations

from ._error_base import IntermissionError

__all__ = [
    "ConflictError",
    "LeaseLostError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StoreClosedError",
    "StoreError",
    "StoreMigrationError",
    "StoreSchemaError",
    "StoreUnavailableError",
]


class StoreError(IntermissionError):
    """A session store failed."""


class SessionNotFoundError(StoreError, KeyError):
    """The store has no session with that id."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no stored session {session_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class ConflictError(StoreError):
    """A save was based on a stale version (compare-and-set failed, R29).

    ``replaced``: the stored session is another generation under the same id (the one this
    copy was loaded from was deleted and a new one saved), whatever the version numbers
    say."""

    def __init__(
        self, session_id: str, expected: int, actual: int | None, *, replaced: bool = False
    ) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        self.replaced = replaced
        what = "was deleted and saved anew (another generation)" if replaced else "changed"
        super().__init__(
            f"session {session_id!r} {what} since it was loaded (version {expected}, "
            f"store has {actual}): load it again and redo the change"
        )


class SessionBusyError(StoreError):
    """Another resumer holds the claim on this session (R30)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {session_id!r} is being resumed by someone else; nothing was run"
        )


class LeaseLostError(StoreError):
    """This resumer's claim lapsed and another resumer took the session over.

    Nothing of this resume was saved (R40). ``ran`` lists what did run meanwhile: effects
    recorded in the ledger (the next holder will not repeat them) and tool calls."""

    def __init__(self, session_id: str, holder: str | None, ran: list[str]) -> None:
        self.session_id = session_id
        self.holder = holder
        self.ran = list(ran)
        what = "; ".join(ran) if ran else "no tool call and no effect"
        super().__init__(
            f"the claim on session {session_id!r} lapsed and "
            f"{holder or 'another resumer'} took it over: nothing of this resume was saved. "
            f"What ran meanwhile: {what}. Effects recorded in the ledger are not repeated; "
            "load the session again to see where it stands"
        )


class StoreClosedError(StoreError):
    """The store was closed and then used again.

    Nothing is opened again (a deleted database file is never re-created): open a new
    store."""

    def __init__(self, store: str) -> None:
        super().__init__(f"{store} is closed: open a new store to use it again")


class StoreUnavailableError(StoreError):
    """The database could not be reached (a restart, a failover, a dropped connection).

    The broken connection was discarded; the next call connects anew (R40)."""

    def __init__(self, message: str, *, outcome_unknown: bool = False) -> None:
        self.outcome_unknown = outcome_unknown
        tail = (
            "the write may or may not have been committed; load the session to see"
            if outcome_unknown
            else "nothing was written; retry when the database is back"
        )
        super().__init__(f"{message}: {tail}")


class StoreSchemaError(StoreError):
    """The database holds a store written by a newer intermission.

    Its schema version is past the one this release knows: refused before anything is
    read or written."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the store's schema is version {found}, newer than this intermission knows "
            f"({known}): it was written by a newer release; upgrade intermission to open it "
            "(nothing was read or written)"
        )


class StoreMigrationError(StoreError):
    """Bringing an older store's tables up to this release's schema failed.

    The migration's transaction was rolled back, so the store is as it was; ``migration`` is
    the migration's number, ``statement`` the SQL that failed."""

    def __init__(self, migration: int, statement: str, why: str) -> None:
        self.migration = migration
        self.statement = statement
        shown = " ".join(statement.split())
        super().__init__(
            f"migration {migration} of the store's schema failed at {shown[:200]!r} "
            f"({why}): the store was left as it was; report this with the release that "
            "wrote the store"
        )
