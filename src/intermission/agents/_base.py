"""What every agent shares: its name, requests (call / call_async / stream) and running as a
member of a team graph."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Self

from .._clock import Clock
from .._ids import IdFactory
from .._version import __version__
from ..core import listeners
from ..core.history import take_checkpoint as _checkpoint
from ..core.listeners import LISTENERS
from ._exclusive import enter, leave
from .request import AgentRequest, AgentResponse
from .versions import check_owner, owner_check

if TYPE_CHECKING:
    from ..core.context import FlowContext
    from ..core.events_log import RunScope
    from ..core.graph import Node
    from ..core.session import AgentSession
    from ..events import Event
    from ..traces import ReActTrace, TeamTrace

__all__ = ["AgentBase", "check_owner"]

RELEASE = __version__


T = TypeVar("T", "ReActTrace", "TeamTrace")
_KEEP: Any = object()


def agent_strict(agent: Any) -> bool:
    """True for an agent that only takes sessions it can tell it made (see check_owner)."""
    return getattr(agent, "_strict_owner", False) is True


class AgentBase:
    """Subclasses implement :meth:`run`; requests and team membership come from here."""

    _name: str
    clock: Clock | None
    ids: IdFactory
    _fingerprint: tuple[Any, str] | None = None
    _strict_owner = False
    _version: str | None = None
    _migrations: dict[str, Any] | None = None

    @property
    def declared_version(self) -> str | None:
        """The version label given with ``.version("2")`` (None: the fingerprint serves)."""
        return self._version

    @property
    def version(self) -> str:
        """The version this agent runs sessions on (R62): its label, else its fingerprint.
        A paused session resumes only on its own version, or migrated on purpose."""
        return self._version if self._version is not None else self.fingerprint

    @property
    def migrations(self) -> dict[str, Any]:
        """The versions this agent migrates sessions from, each with its upcaster."""
        return dict(self._migrations or {})

    def migrates_from(self, version: str, fn: Callable[[Any], None]) -> Self:
        """Register ``fn(session)`` to upcast a session paused on ``version`` to this one;
        it may change context values and rewrite a pending call's arguments
        (``HITL.rewrite_args`` on ``session.hitl.tasks``: a migration on resume runs after
        the resuming decision is recorded, and a rewrite voids it). It runs on resume when
        ``version`` is not served, or when asked (``table.migrate(session, to=...)``).
        Returns the agent."""
        from .. import _check

        _check.text("version", version, empty=False)
        _check.function("fn", fn)
        if version == self.version:
            from ..errors import UsageError

            raise UsageError(f"{self._name}@{version} cannot migrate from its own version")
        self._migrations = {**(self._migrations or {}), version: fn}
        return self

    @property
    def name(self) -> str:
        """The agent's name (also its node id in a team)."""
        return self._name

    @property
    def fingerprint(self) -> str:
        """A short hash of what decides this agent's effects: its tools and their argument
        schemas, its approval policy (for a team: its graph and members). A session
        records the fingerprint of the agent that made it and refuses another
        (AgentMismatchError) unless adopted; see :mod:`intermission.agents.fingerprint`
        for what is in it and what is deliberately not (the model, prompts, docstrings)."""
        key = self._fingerprint_key()
        cached = self._fingerprint
        if cached is None or cached[0] is not key:
            from .fingerprint import digest

            cached = self._fingerprint = (key, digest(self._fingerprint_data()))
        return cached[1]

    def _fingerprint_key(self) -> Any:
        """What, when replaced, makes the cached fingerprint stale (a team's compiled
        graph: editing its spec compiles a new one)."""
        return None

    def _fingerprint_data(self) -> Any:
        raise NotImplementedError

    def prompt(self, text: str | None = None) -> AgentRequest:
        """A new task (``text``), or — empty — continue the original prompt (R3)."""
        from .. import _check

        _check.text("prompt", text, optional=True)
        return AgentRequest(self._request, text)

    async def _request(
        self,
        session: AgentSession,
        prompt: str | None,
        sink: Callable[[Event], None] | None,
        pacer: Callable[[], Coroutine[Any, Any, None]] | None,
        *,
        adopt: bool = False,
        requester: Any = None,
    ) -> AgentResponse:
        from ..core.events_log import RunScope

        scope = RunScope(self.ids("run"), self._name, session, self.clock, sink, pacer)
        run = self.run(session, prompt, scope, top_level=True)
        # a new prompt names who sent it (None: nobody said); a resume keeps its request's
        return await self._exclusive(
            session, run, adopt=adopt, requester=requester if prompt else _KEEP
        )

    async def _exclusive(
        self,
        session: AgentSession,
        run: Coroutine[Any, Any, AgentResponse],
        *,
        adopt: bool,
        requester: Any = _KEEP,
    ) -> AgentResponse:
        """Await ``run``, a top-level request, as the only one on ``session`` (see enter),
        once this agent is the session's own (check_owner: refused before anything
        changes, unless ``adopt``); ``requester``: who sent it, recorded once the request
        is the session's own (``_KEEP``: a resume keeps the recorded one)."""
        try:
            me = await enter(session)
        except BaseException:
            run.close()  # never started: no "never awaited" warning
            raise
        try:
            migrate = owner_check(session, self, adopt=adopt)
            if migrate is not None:  # under the caller's claim, before any session code
                from .versions import migrate_session

                migrate_session(session, self, migrate)
            elif adopt and session.agent is not None:
                _adopted(session, self)
        except BaseException:
            run.close()
            leave(session, me)
            raise
        if requester is not _KEEP:
            session.requester = requester  # type: ignore[attr-defined]
        since = session.events.next_seq
        try:
            response = await run
        except BaseException as exc:
            # an error or a cancel ends a request too (R43), unless it was refused before
            # it logged anything
            _checkpoint(session, failing=True, since=since)
            if LISTENERS:
                listeners.ended(session, exc)
            raise
        else:
            _checkpoint(session, failing=False)
            if LISTENERS:
                listeners.ended(session, None)
            return response
        finally:
            leave(session, me)

    async def run_as_member(self, ctx: FlowContext, node: Node) -> None:
        """Run as a node of a team graph (teams nest)."""
        from .team_member import run_member

        await run_member(self, ctx, node)

    async def run(
        self, session: AgentSession, prompt: str | None, scope: RunScope, *, top_level: bool
    ) -> AgentResponse:
        """One request on ``session`` (used by requests and by teams)."""
        raise NotImplementedError

    def _open(
        self, session: AgentSession, trace: T | None, new: Callable[[], T], *, top_level: bool
    ) -> T:
        """Start a request: clear pending (R3; a pending() racing with this from another
        thread is cleared too, R5), own a top-level session, and get this agent's trace
        (``new()`` makes it on the first request)."""
        session.pending(False, None)
        if top_level:  # (the request checked it may: check_owner)
            session.agent = self._name
            session.agent_fingerprint = self.fingerprint
            session.agent_version = self.version
            session.release = RELEASE
        if trace is None:
            trace = new()
            session.traces[self._name] = trace
        trace._session = session
        return trace


def _adopted(session: AgentSession, agent: AgentBase) -> None:
    """Note an adoption on the audit trail: the session changes hands on purpose."""
    from ..audit import by_hand, note
    from ..hitl.deciding import default_principal
    from ..principals import actor_of

    if (
        session.agent == agent.name
        and session.agent_version == agent.version
        and (session.agent_fingerprint == agent.fingerprint)
    ):
        return  # (its own already: nothing changes hands)
    who = actor_of(default_principal(None), via="api")
    old = f"{session.agent}@{session.agent_version or session.agent_fingerprint or '?'}"
    note(session, by_hand(
        "agent.adopted", agent.name, who, via=who.via if who else None,
        reason=f"adopted {old} by {agent.name}@{agent.version}",
        detail={"from_agent": session.agent, "from_version": session.agent_version,
                "from_fingerprint": session.agent_fingerprint, "agent": agent.name,
                "version": agent.version},
    ))  # fmt: skip
