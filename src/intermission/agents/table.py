"""AgentTable: the agents a process serves, several versions per name (R62).

``AgentTable({"ops": [ops_v1, ops_v2]})`` — entries are agents or factories, one or a
list per name, oldest first. New sessions start on the newest version; a paused session
resumes on the version it paused under (:meth:`AgentTable.for_session`), or on a newer one
that migrates it when its own is no longer served. With both served, nothing migrates
unless asked (:meth:`AgentTable.migrate`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import AgentMigrationError, AgentVersionError, IntermissionError, UsageError
from .versions import migrate_session, owner_check, version_of

__all__ = ["AgentTable"]

Entry = Any
"""An agent, or a function of no arguments returning one."""


class AgentTable:
    """Agents by name and version, each built on first use.

    There is one instance per version: it decides and resumes (R49).

    Example:
        >>> from intermission import ReActAgent, ScriptedModel
        >>> v1 = ReActAgent.of(ScriptedModel(["ok"])).name("ops").version("1").build()
        >>> v2 = ReActAgent.of(ScriptedModel(["ok"])).name("ops").version("2").build()
        >>> table = AgentTable({"ops": [v1, v2]})
        >>> table.versions("ops"), table.get("ops").version
        (['1', '2'], '2')
    """

    def __init__(
        self, entries: Mapping[str, Entry | Sequence[Entry]], *, origin: str | None = None
    ) -> None:
        if isinstance(entries, AgentTable):
            entries = entries._entries
        if not isinstance(entries, Mapping) or not all(isinstance(k, str) for k in entries):
            raise UsageError(
                f"AgentTable takes a mapping of agent names to agents, factories or lists of "
                f"them (oldest first), not {type(entries).__name__}"
            )
        self.origin = origin
        """Where the entries came from (``--agents module:ATTR``), for error messages."""
        self._entries: dict[str, list[Entry]] = {}
        for name, entry in entries.items():
            listed = list(entry) if isinstance(entry, (list, tuple)) else [entry]
            if not listed:
                raise UsageError(f"AgentTable: {name!r} lists no agent")
            self._entries[name] = listed
        self._built: dict[str, list[Any]] = {}

    def __repr__(self) -> str:
        return f"AgentTable({', '.join(self.names())})"

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        """The agent names served."""
        return sorted(self._entries)

    def agents(self, name: str) -> list[Any]:
        """Every version of ``name``, built, oldest first."""
        self._known(name)
        if name not in self._built:
            built = [self._build(name, entry) for entry in self._entries[name]]
            labels = [version_of(a) for a in built]
            twice = {v for v in labels if labels.count(v) > 1}
            if twice:
                raise UsageError(
                    f"agent {name!r} lists version {sorted(twice)[0]!r} twice; each version "
                    "of a name is served once"
                )
            self._built[name] = built
        return list(self._built[name])

    def versions(self, name: str) -> list[str]:
        """The versions of ``name`` served, oldest first."""
        return [version_of(a) for a in self.agents(name)]

    def served(self) -> list[tuple[str, str]]:
        """Every ``(name, version)`` served."""
        return [(n, v) for n in self.names() for v in self.versions(n)]

    def newest(self, name: str | None) -> Any:
        """The newest version of ``name``: what a new session starts on."""
        self._known(name)
        assert name is not None
        return self.agents(name)[-1]

    get = newest
    __call__ = newest

    def version(self, name: str, label: str) -> Any:
        """The agent ``name`` at version ``label``; AgentVersionError when not served."""
        for agent in self.agents(name):
            if version_of(agent) == label:
                return agent
        raise AgentVersionError("-", name, label, self.versions(name))

    def serves(self, session: Any) -> bool:
        """True when this table runs ``session`` as it is or migrates it."""
        try:
            owner_check(session, self.for_session(session))
        except IntermissionError:
            return False
        return True

    def for_session(self, session: Any) -> Any:
        """The agent that resumes ``session``: its own version (pinned), else the newest
        version that migrates from it; a session of no agent yet gets nothing (use
        :meth:`newest`). Raises AgentVersionError — nothing changed — when no served
        version runs or migrates it. A session versioned by its fingerprint (no label)
        goes to the served version that owns it by fingerprint, else to the newest, whose
        ownership check then refuses it (AgentMismatchError), as before versions."""
        name = getattr(session, "agent", None)
        if name is None:
            raise UsageError(
                f"session {session.session_id!r} has no agent yet: start it on table.newest(name)"
            )
        agents = self.agents(name)
        paused = getattr(session, "agent_version", None)
        unlabelled = paused is None or paused == getattr(session, "agent_fingerprint", None)
        if unlabelled and not any(paused in getattr(a, "migrations", {}) for a in agents):
            # unversioned (an earlier release) or versioned by fingerprint: whoever owns it
            # by fingerprint (an earlier algorithm's too), else the newest, whose check
            # names what differs. A session that recorded no fingerprint (paused before
            # fingerprints) is accepted by every version of its name: it goes to the
            # oldest served, the one of its time — never to newer code it was not
            # approved on while that one is still served
            # (a thread created for its first request, "new", starts on the newest)
            blind = getattr(session, "agent_fingerprint", None) is None and getattr(
                session, "status", None
            ) not in (None, "new")
            for agent in agents if blind else reversed(agents):
                try:
                    owner_check(session, agent)
                except IntermissionError:
                    continue
                return agent
            # owned by none: the newest, whose check refuses it as another agent's (other
            # tools or policy; AgentMismatchError says how to adopt it on purpose)
            return agents[-1]
        for agent in agents:
            if version_of(agent) == paused:
                return agent
        for agent in reversed(agents):
            if paused in getattr(agent, "migrations", {}):
                return agent
        raise AgentVersionError(session.session_id, name, paused, [version_of(a) for a in agents])

    def migrate(self, session: Any, to: str) -> Any:
        """Migrate ``session`` to version ``to`` of its agent now (with both versions
        served, nothing migrates unless asked); returns that agent. The caller holds the
        claim and saves (``python -m intermission migrate ID --to 2`` does both). A
        migration that raises leaves the session as it was (AgentMigrationError)."""
        name = getattr(session, "agent", None)
        if name is None:
            raise UsageError(f"session {session.session_id!r} has no agent to migrate")
        served = self.versions(name)
        if to not in served:  # (table.version's error would say the session paused on ``to``)
            shown = ", ".join(f"{name}@{v}" for v in served)
            raise AgentMigrationError(
                f"cannot migrate session {session.session_id!r} to {name}@{to}: that version "
                f"is not served here (served: {shown}); nothing was changed",
                session_id=session.session_id, to_version=to,
                from_version=getattr(session, "agent_version", None),
            )  # fmt: skip
        target = self.version(name, to)
        # an unversioned session (an earlier release) is on its fingerprint's version
        paused = getattr(session, "agent_version", None) or getattr(
            session, "agent_fingerprint", None
        )
        if paused == to:
            return target
        migrate_session(session, target, str(paused))
        return target

    def factories(self) -> dict[str, Callable[[], Any]]:
        """The newest version of every name as a factory (each built now, so a broken one
        fails here)."""
        return {name: _const(self.newest(name)) for name in self.names()}

    def _known(self, name: str | None) -> None:
        if name not in self._entries:
            known = ", ".join(self.names()) or "none"
            where = f"in --agents {self.origin}" if self.origin else "in this table"
            raise IntermissionError(f"no agent named {name!r} {where} (known: {known})")

    def _build(self, name: str, entry: Entry) -> Any:
        agent = entry
        where = f"--agents {self.origin}: " if self.origin else "AgentTable: "
        if not hasattr(entry, "prompt"):
            if not callable(entry):
                raise UsageError(f"{where}{name!r} gives a {type(entry).__name__}, not an agent")
            try:
                agent = entry()
            except Exception as exc:
                raise UsageError(
                    f"{where}the factory for {name!r} raised {type(exc).__name__}: {exc}"
                ) from None
        if not hasattr(agent, "prompt") or not hasattr(agent, "name"):
            raise UsageError(
                f"{where}{name!r} gives a {type(agent).__name__}, not an agent (a ReActAgent "
                "or TeamAgent, or a function returning one)"
            )
        if agent.name != name:
            raise UsageError(
                f"{where}{name!r} lists an agent named {agent.name!r}: a table's names are "
                "its agents' own (sessions record them)"
            )
        return agent


def _const(agent: Any) -> Callable[[], Any]:
    return lambda: agent
