"""Which agent a view's session runs on (a table's version for it, R62), and the plain
sentence a view shows when no agent at hand runs it."""

from __future__ import annotations

from typing import Any

from ..agents.versions import owner_check
from ..errors import AgentMismatchError, AgentVersionError, IntermissionError
from ..stores.decide import runner_for
from ..stores.listings import version_label as label_of

__all__ = ["agent_for", "shape_of", "unserved_text", "version_label"]


def version_label(session: Any) -> str:
    """The agent and version a session runs on, as people write it (``ops@1``; just the
    name for a session of an earlier release that recorded no version; "" for none)."""
    name = getattr(session, "agent", None)
    return label_of(name, getattr(session, "agent_version", None) or None) if name else ""


def unserved_text(error: IntermissionError, session: Any = None) -> str:
    """The plain sentence a view shows for a session no agent at hand runs or migrates
    (R62): which version it paused on, which are served, and that nothing can be decided
    here. Never an exception's class name."""
    if isinstance(error, AgentVersionError):
        name = error.agent
        paused = f"{name}@{error.paused or '?'}"
        served = ", ".join(f"{name}@{v}" for v in error.served) or "none"
        return (
            f"This session paused on {paused}, which is not served here (served: {served}); "
            "nothing can be decided from this view."
        )
    shown = version_label(session) or "an unnamed agent"
    return (
        f"This session runs on {shown}, which is not served here; nothing can be decided "
        "from this view."
    )


def agent_for(agent: Any, session: Any) -> Any:
    """The agent that runs ``session``: a table's agent for its version (R62), or
    ``agent`` itself. Raises AgentVersionError, changing nothing, when that version is not
    served (a plain agent of another version that does not migrate it, too); another
    mismatch is left to the decision's own check, which says what differs."""
    if hasattr(agent, "for_session"):
        runner = runner_for(agent, session)
        try:  # (an unlabelled session no served version owns: that version is not here)
            owner_check(session, runner)
        except AgentVersionError:
            raise
        except AgentMismatchError as exc:
            name = str(getattr(session, "agent", None))
            raise AgentVersionError(
                session.session_id, name, getattr(session, "agent_version", None),
                agent.versions(name),
            ) from exc  # fmt: skip
        return runner
    if hasattr(agent, "prompt"):
        try:
            owner_check(session, agent)
        except AgentVersionError:
            raise
        except IntermissionError:
            pass
    return agent


def shape_of(agent: Any, session: Any) -> Any:
    """An agent of ``session``'s name to tell what it is (a team with a graph, its tools):
    the one that runs it, else a table's newest of that name; None when none is here."""
    try:
        return agent_for(agent, session)
    except IntermissionError:
        pass
    if hasattr(agent, "newest"):
        try:
            return agent.newest(getattr(session, "agent", None))
        except IntermissionError:
            return None
    return agent
