"""The CLI's agents: yours from ``--agents module:ATTR``, else the bundled examples, which
serve the ``demo`` command's sessions only.

A session is resumed by the agent that made it (its name and fingerprint, see
:mod:`intermission.agents.fingerprint`): a session your own code made is never resumed
with an example that happens to share its name. Without ``--agents`` the examples are
strict: they also refuse a session saved before fingerprints were recorded (who made it
cannot be told). Everything that can go wrong with ``--agents`` — no such module, no such
attribute, not a mapping, a factory that raises or makes no agent — is a one-line
:class:`~intermission.UsageError`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import Any

from ._text import visible
from .agents.table import AgentTable as PublicAgentTable
from .errors import AgentMismatchError, IntermissionError, UsageError

__all__ = ["AgentTable", "demo_only_message", "load_agents"]


class AgentTable(PublicAgentTable):
    """The CLI's table: :class:`intermission.AgentTable` loaded from ``--agents`` (None: the
    bundled examples, strict about whose sessions they take)."""

    def __init__(self, entries: Mapping[str, Any], spec: str | None) -> None:
        super().__init__(entries, origin=spec)
        self.spec = spec

    @property
    def bundled(self) -> bool:
        """True for the bundled examples (no ``--agents``)."""
        return self.spec is None

    def _known(self, name: str | None) -> None:
        if name not in self:
            known = ", ".join(self.names()) or "none"
            where = f"in --agents {self.spec}" if self.spec else "among the bundled examples"
            raise IntermissionError(
                f"no agent named {name!r} {where} (known: {known}); pass --agents "
                "module:AGENTS, a dict of your agents (or factories, or lists of versions, "
                "oldest first) by name"
            )

    def _build(self, name: str, entry: Any) -> Any:
        agent = super()._build(name, entry)
        if self.bundled:
            agent._strict_owner = True  # (see the module docstring)
        return agent


def load_agents(spec: str | None) -> AgentTable:
    """``module:ATTR`` → its agents (a mapping of names to agents or factories); None →
    the bundled examples. The module is looked up in the current directory too, as
    ``python -m`` does (the ``intermission`` script starts elsewhere)."""
    if spec is None:
        from .examples import AGENTS

        return AgentTable(AGENTS, None)
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise UsageError(
            f"--agents takes module:ATTR (say myapp.agents:AGENTS), not {visible(spec)!r}"
        )
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"--agents {spec}: cannot import {module_name!r} ({exc}); run from the directory "
            "that holds it or put it on PYTHONPATH"
        ) from None
    except Exception as exc:  # (its own import failed: a syntax error, a missing key)
        raise UsageError(
            f"--agents {spec}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    if not hasattr(module, attr):
        raise UsageError(f"--agents {spec}: module {module_name!r} has no attribute {attr!r}")
    found = getattr(module, attr)
    what = attr
    if callable(found) and not isinstance(found, Mapping) and not hasattr(found, "prompt"):
        what = f"{attr}()"
        try:
            found = found()  # (a function returning the mapping)
        except Exception as exc:
            raise UsageError(
                f"--agents {spec}: calling {attr} raised {type(exc).__name__}: {exc}"
            ) from None
    if not isinstance(found, Mapping) or not all(isinstance(k, str) for k in found):
        raise UsageError(
            f"--agents {spec}: {what} is a {type(found).__name__}, not a mapping of agent "
            "names to agents or factories ({'ops': build_ops})"
        )
    return AgentTable(found, spec)


def demo_only_message(exc: AgentMismatchError) -> str:
    """The refusal of the bundled examples to resume a session they did not make."""
    who = f"agent {exc.recorded!r}" if exc.recorded is not None else "another agent"
    if exc.recorded_fingerprint is not None:
        who += f" (fingerprint {exc.recorded_fingerprint})"
    return (
        f"session {exc.session_id!r} was made by {who}, not by the bundled example "
        f"{exc.agent!r}: without --agents only the demo's sessions are run; pass --agents "
        "module:AGENTS (your agents by name); nothing was changed"
    )
