"""What ``store.pending()`` and ``store.stuck()`` return: entries built from the indexed
columns (parsed only when read), pages that report the rows they could not read, and the
sessions stuck on an effect of unknown outcome."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from ..decisions import HITLTask
from ..errors import SnapshotSchemaError, UsageError, _utc

__all__ = [
    "PendingPage",
    "PendingSession",
    "StuckSession",
    "UnreadableSession",
    "VersionCount",
    "pending_of",
    "sorted_versions",
    "version_filter",
    "version_label",
]

_Row = tuple[
    str, str | None, str | None, str, float | None, float, str, float, str | None, str | None
]


def version_label(agent: str | None, version: str | None) -> str:
    """How listings show an agent version: ``ops@2`` (``?`` for a session no agent ran
    yet; the name alone for one paused before versions were recorded). The version is
    shown whole, a fingerprint too (16 hex digits): the label is what ``--version`` takes
    back."""
    name = "?" if agent is None else agent
    return name if version is None else f"{name}@{version}"


def version_filter(version: str | None, agent: str | None = None) -> tuple[str | None, str | None]:
    """The ``(agent, version)`` a ``version=`` filter of ``pending()`` means: ``"ops@2"``
    is version ``2`` of agent ``ops`` (split at the last ``@``: names may hold one),
    ``"2"`` version ``2`` of any agent (or of ``agent``, when given). Raises UsageError for
    an empty part, or an ``agent`` other than the one named in ``version``."""
    if version is None:
        return agent, None
    if not isinstance(version, str):
        raise UsageError(f"version is a str ('ops@2' or '2'), not {type(version).__name__}")
    name, at, number = version.rpartition("@")
    if not number or (at and not name):
        raise UsageError(
            f"version is 'VERSION' or 'AGENT@VERSION' (say 'ops@2' or '2'), not {version!r}"
        )
    if not at:
        return agent, number
    if agent is not None and agent != name:
        raise UsageError(f"version {version!r} names agent {name!r}, and agent is {agent!r}")
    return name, number


class PendingSession(_Row):
    """One entry of ``store.pending()``. Tasks and request are parsed when first read, so
    listing a page costs what the indexed query costs. A tuple of the stored columns
    underneath: a page of rows becomes a page of entries without a call per field."""

    def __new__(
        cls,
        session_id: str,
        agent: str | None,
        reason: str | None,
        tasks_json: str = "[]",
        deadline_ms: float | None = None,
        updated_ms: float = 0.0,
        request_json: str = "null",
        pending_since: float | None = None,
        progress: str | None = None,
        agent_version: str | None = None,
    ) -> PendingSession:
        """An entry from its columns (stores build them with :meth:`from_rows`)."""
        since = updated_ms if pending_since is None else pending_since
        row = (session_id, agent, reason, tasks_json, deadline_ms, updated_ms, request_json, since,
               progress, agent_version)  # fmt: skip
        return tuple.__new__(cls, row)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> list[PendingSession]:
        """Entries from stored rows, one per row.

        A row is ``(id, agent, reason, tasks, deadline, updated, request, pending_since,
        progress, agent_version)``; further columns are ignored."""
        return list(map(partial(tuple.__new__, cls), rows))

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self[0]

    @property
    def agent(self) -> str | None:
        """The agent (or graph) the session belongs to."""
        return self[1]

    @property
    def reason(self) -> str | None:
        """Why it waits (the reason given to ``pending``)."""
        return self[2]

    @property
    def deadline_ms(self) -> float | None:
        """The earliest task deadline, if any."""
        return self[4]

    @property
    def updated_ms(self) -> float:
        """When it was last saved (by the store's clock)."""
        return self[5]

    @property
    def pending_since(self) -> float:
        """When it became pending (by the store's clock); saves while it stays pending
        keep it, so pages keyed on it never skip or repeat a session that stays open."""
        return self[7]

    @property
    def progress(self) -> str | None:
        """What its approvals with a policy have and still need, in words (None: it has
        none), e.g. ``deploy: 1 of 2 approvals (alice, sre) — waiting for one more from
        sre``."""
        return self[8] if len(self) > 8 else None

    @property
    def agent_version(self) -> str | None:
        """The agent version the session paused under (``.version()``, else the agent's
        fingerprint; None: paused before versions were recorded)."""
        return self[9] if len(self) > 9 else None

    @property
    def version_label(self) -> str:
        """Agent and version as listings show them, e.g. ``ops@2`` (see
        :func:`version_label`)."""
        return version_label(self[1], self.agent_version)

    @property
    def tasks(self) -> list[HITLTask]:
        """The undecided tool calls (empty for graph approvals). A stored column that
        cannot be read raises SnapshotSchemaError (listings report the session as
        unreadable)."""
        cache = self.__dict__
        tasks: list[HITLTask] | None = cache.get("tasks")
        if tasks is None:
            try:
                parsed = [HITLTask.model_validate(t) for t in json.loads(self[3] or "[]")]
            except (ValueError, TypeError) as exc:  # (pydantic's ValidationError is one)
                raise _unreadable_column(self[0], "tasks", exc) from None
            tasks = cache["tasks"] = parsed
        return tasks

    @property
    def request(self) -> Any:
        """What the human is asked to review (``approval.request`` of graph approvals)."""
        cache = self.__dict__
        if "request" not in cache:
            try:
                cache["request"] = json.loads(self[6]) if self[6] else None
            except ValueError as exc:
                raise _unreadable_column(self[0], "request", exc) from None
        return cache["request"]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PendingSession) and (self[0], self[5]) == (other[0], other[5])

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self[0], self[5]))

    def __repr__(self) -> str:
        return f"PendingSession({self[0]!r}, agent={self[1]!r}, reason={self[2]!r})"


def _unreadable_column(session_id: str, column: str, exc: BaseException) -> SnapshotSchemaError:
    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return SnapshotSchemaError(
        f"the stored {column} of session {session_id!r} cannot be read ({first}); the row "
        "was damaged or written by another program: look at it with `python -m "
        "intermission show`, or delete it",
        path=column,
    )


class UnreadableSession(NamedTuple):
    """A stored session a listing left out because its row cannot be read: ``why`` says
    what is wrong (cut short, written by a newer intermission, damaged)."""

    session_id: str
    why: str
    pending_since: float | None = None
    """Its place in ``pending()`` order (None when it is not known)."""


class PendingPage(list[PendingSession]):
    """A page of ``store.pending()``: the readable entries, newest first, and
    :attr:`unreadable`, the rows of the same range that could not be read (reported, not
    listed: one bad row never hides the others)."""

    unreadable: list[UnreadableSession]
    ids: list[str]
    """Every row of the page's range in order, readable or not (their session ids)."""

    def __init__(
        self,
        entries: Iterable[PendingSession] = (),
        unreadable: Iterable[UnreadableSession] = (),
        ids: Iterable[str] | None = None,
    ) -> None:
        super().__init__(entries)
        self.unreadable = list(unreadable)
        self.ids = [p[0] for p in self] if ids is None else list(ids)

    @property
    def last(self) -> PendingSession | None:
        """The oldest row this page covered, readable or not: ``before=page.last`` pages
        on without meeting an unreadable row twice."""
        last = self[-1] if self else None
        for u in self.unreadable:
            if u.pending_since is None:
                continue
            key = (u.pending_since, u.session_id)
            if last is None or key < (last.pending_since, last.session_id):
                last = PendingSession(u.session_id, None, None, pending_since=u.pending_since)
        return last


class StuckSession(NamedTuple):
    """A session that needs a person: an effect it started (``session.once``) never
    recorded its outcome (its process died, or the write was lost), and nobody holds the
    session's claim now (a holder that died is listed once its lease lapsed). Check the
    external system, then resolve or forget the effect
    (:func:`~intermission.stores.resolve_unknown_effect`, ``python -m intermission
    resolve|forget``, the console)."""

    session_id: str
    agent: str | None
    status: str
    key: str
    """The effect's idempotency key."""
    started_ms: float
    damage: str | None = None
    """Why its ledger entry cannot be read (None: it can). A damaged entry is listed, not
    left to blank the listing; it is fixed by hand (``started_ms`` is then 0)."""

    @property
    def why(self) -> str:
        """One line for a listing."""
        if self.damage is not None:
            return (
                f"the ledger entry of effect {self.key!r} cannot be read ({self.damage}): "
                "it was damaged or written by another program; restore it from a backup, or "
                "delete the session"
            )
        return (
            f"effect {self.key!r} started at {_utc(self.started_ms)} and its outcome was "
            "never recorded: check the external system, then resolve it (it happened) or "
            "forget it (it did not)"
        )


def pending_of(
    session_id: str,
    agent: str | None,
    reason: str | None,
    tasks_json: str,
    deadline: float | None,
    updated: float,
    request_json: str,
    pending_since: float | None = None,
    progress: str | None = None,
    agent_version: str | None = None,
) -> PendingSession:
    """Build a PendingSession from stored columns (nothing parsed yet)."""
    return PendingSession(
        session_id, agent, reason, tasks_json, deadline, updated, request_json, pending_since,
        progress, agent_version,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class VersionCount:
    """One entry of ``store.versions()``: how many sessions of an agent version wait for
    a person, and since when the oldest of them waits (by the store's clock)."""

    agent: str | None
    """The agent's name (None: sessions no agent ran yet)."""
    version: str | None
    """The version they paused under (None: paused before versions were recorded)."""
    count: int
    """How many of them are pending."""
    oldest_ms: float
    """When the one pending longest became pending (epoch ms)."""

    @property
    def label(self) -> str:
        """``ops@2``, as ``pending --version`` takes it (see :func:`version_label`)."""
        return version_label(self.agent, self.version)


def sorted_versions(counts: Iterable[VersionCount]) -> list[VersionCount]:
    """``versions()`` order: by agent name (sessions of no agent last), then the version
    waiting longest first (the one draining, on a blue-green deploy), same on every store."""
    return sorted(
        counts, key=lambda c: (c.agent is None, c.agent or "", c.oldest_ms, c.version or "")
    )
