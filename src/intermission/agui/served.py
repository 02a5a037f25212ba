"""What one server runs (R62): agent names, and per name one version (a mapping) or
several (an :class:`~intermission.AgentTable`).

A new thread starts on the newest version of its name; a stored session runs on its own
version, or on a newer one that migrates it (``migrates_from``). A session of a version
this server neither serves nor migrates is refused before any of its code runs
(:class:`~intermission.AgentVersionError`): blue-green servers share one store, and the
server that still serves the old version drains its sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..agents.table import AgentTable
from ..agents.versions import version_of
from ..errors import AgentVersionError, IntermissionError, UsageError

__all__ = ["Served", "version_label"]


def version_label(session: Any) -> str | None:
    """``ops@1``: a session's agent name and version (None before its first request)."""
    name = getattr(session, "agent", None)
    version = getattr(session, "agent_version", None)
    if name is None or version is None:
        return None
    return f"{name}@{version}"


def _always(agent: Any) -> Callable[[], Any]:
    def same() -> Any:
        return agent

    return same


def _factories(agents: Any) -> dict[str, Callable[[], Any]]:
    """``agents`` as factories: an agent instance (it has ``prompt``) serves every run."""
    if not isinstance(agents, Mapping):
        raise UsageError(
            "agents is an AgentTable or a mapping of agent names to agents or factories"
        )
    out: dict[str, Callable[[], Any]] = {}
    for key, value in agents.items():
        if callable(getattr(value, "prompt", None)):
            out[key] = _always(value)
        elif callable(value):
            out[key] = value
        else:
            raise UsageError(
                f"agents[{key!r}] is an agent or a function returning one, "
                f"not {type(value).__name__}"
            )
    return out


def _check_names(agents: Mapping[str, Any]) -> None:
    for key, agent in agents.items():
        # threads are keyed by the agent's own name (session.agent): a route under another
        # name would pause threads no resume on that route can reach
        own = getattr(agent, "name", None)
        if isinstance(own, str) and own != key:
            raise UsageError(
                f"agents[{key!r}] makes an agent named {own!r}: serve it as {own!r} "
                "(a thread belongs to its agent's own name)"
            )


class Served:
    """The agents of one server. ``agents``: an AgentTable (several versions per name;
    one instance per version serves every run), a mapping whose values list versions
    (oldest first: made into a table), or name → agent or factory (called once per run,
    for agents that keep state of their own between calls)."""

    def __init__(self, agents: Any) -> None:
        self.table: AgentTable | None = None
        self._factories: dict[str, Callable[[], Any]] = {}
        self._probes: dict[str, Any] = {}
        if isinstance(agents, Mapping) and any(
            isinstance(v, (list, tuple)) for v in agents.values()
        ):
            agents = AgentTable(agents)
        if isinstance(agents, AgentTable):
            self.table = agents
            for name in agents.names():  # built now: a broken one fails at start
                _check_names({name: agents.newest(name)})
            return
        self._factories = _factories(agents)
        # one instance per name tells its version (a listing asks per session)
        self._probes = {key: factory() for key, factory in self._factories.items()}
        _check_names(self._probes)

    def __contains__(self, name: object) -> bool:
        if self.table is not None:
            return name in self.table
        return name in self._factories

    def names(self) -> list[str]:
        """The agent names served."""
        return self.table.names() if self.table is not None else sorted(self._factories)

    def newest(self, name: str) -> Any:
        """The agent a new thread of ``name`` starts on (for a mapping: a fresh one)."""
        if self.table is not None:
            return self.table.newest(name)
        return self._factories[name]()

    def versions(self, name: str) -> list[str]:
        """The versions of ``name`` served, oldest first."""
        if self.table is not None:
            return self.table.versions(name)
        return [version_of(self._probes[name])]

    def for_session(self, session: Any, fresh: Any = None) -> Any:
        """The agent that runs ``session``: its own version, else one that migrates it;
        AgentVersionError (nothing changed) when none does. ``fresh``: this run's
        instance of a mapping's agent (a factory is called once per run)."""
        if self.table is not None:
            if getattr(session, "agent", None) is None:
                return fresh
            return self.table.for_session(session)
        name = getattr(session, "agent", None)
        agent = fresh if fresh is not None else self.newest(str(name))
        self._check(session, agent)
        return agent

    def serves(self, session: Any) -> bool:
        """True when this server runs ``session`` as it is or migrates it."""
        name = getattr(session, "agent", None)
        if name is None or name not in self:
            return False
        if self.table is not None:
            return self.table.serves(session)
        try:
            self._check(session, self._probes[name])
        except IntermissionError:
            return False
        return True

    @staticmethod
    def _check(session: Any, agent: Any) -> None:
        paused = getattr(session, "agent_version", None)
        if paused is None:  # unversioned: the request's own check judges it
            return
        if paused == version_of(agent) or paused in getattr(agent, "migrations", {}):
            return
        if paused == getattr(session, "agent_fingerprint", None):
            return  # an unlabelled version is its fingerprint: the request's check judges it
        raise AgentVersionError(
            session.session_id, str(session.agent), paused, [version_of(agent)]
        )

    def describe(self, session: Any) -> dict[str, Any]:
        """What a listing says of a session's version: ``version`` (``ops@1``),
        ``served`` and, when not served, ``waiting`` (a sentence for the console)."""
        label = version_label(session)
        served = self.serves(session)
        out: dict[str, Any] = {"version": label, "served": served}
        if not served:
            name = getattr(session, "agent", None)
            here = ""
            if isinstance(name, str) and name in self:
                here = ", ".join(f"{name}@{v}" for v in self.versions(name))
            what = label or f"agent {name!r}"
            out["waiting"] = f"waiting for {what}, not served here" + (
                f" (this server serves {here})" if here else ""
            )
        return out
