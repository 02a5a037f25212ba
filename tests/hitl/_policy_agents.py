"""Agents for the CLI's ``--agents tests.hitl._policy_agents:AGENTS``: ``ops``, whose
``delete_user`` approvers are a callable policy (only alice may decide), and ``deploy``,
whose ``deploy`` has an ApprovalPolicy (two sre approvals, not the requester). Every real
run appends a line to ``$IM_EFFECT_FILE``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from intermission import (
    ApprovalPolicy,
    HITLInterceptor,
    HITLTask,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.core.session import AgentSession
from intermission.testing.workers import append_effect


def only_alice(reviewer: str | None, task: HITLTask) -> bool:
    """Alice, or whoever ``$IM_ALLOWED`` names (a CLI test's own OS user)."""
    return reviewer == os.environ.get("IM_ALLOWED", "alice")


def ops_agent(who: Callable[[str | None, HITLTask], bool] = only_alice) -> Any:
    """Asks before ``delete_user``; ``who(reviewer, task)`` says who may decide."""

    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (irreversible)."""
        append_effect(os.environ.get("IM_EFFECT_FILE", os.devnull))(f"delete {user_id}")
        return f"user {user_id} deleted"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("delete_user", {"user_id": 1001})]

    hitl = HITLInterceptor().on_tool("delete_user").approvers(who)
    builder = ReActAgent.of(ScriptedModel(script)).name("ops").tools(delete_user)
    return builder.interceptor(hitl).build()


AGENTS: dict[str, Any] = {"ops": ops_agent}


SURFACE_POLICY = ApprovalPolicy(roles={"sre"}, approvals=2, not_requester=True)
"""The policy every surface of tests/hitl/test_policy_surfaces.py enforces alike."""


def deploy_agent() -> Any:
    """Asks two distinct sre principals, neither the requester, before ``deploy`` runs;
    every run appends ``<session id> deploy <env>`` to ``$IM_EFFECT_FILE``."""

    @tool
    def deploy(env: str, session: AgentSession) -> str:
        """Deploy to an environment."""
        path = os.environ.get("IM_EFFECT_FILE", os.devnull)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, f"{session.session_id} deploy {env}\n".encode())
        finally:
            os.close(fd)
        return f"deployed {env}"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("deploy", {"env": "prod"})]

    hitl = HITLInterceptor().on_tool("deploy", policy=SURFACE_POLICY)
    builder = ReActAgent.of(ScriptedModel(script)).name("deploy").tools(deploy)
    return builder.interceptor(hitl).build()


AGENTS["deploy"] = deploy_agent

if __name__ == "__main__":  # ``python -m tests.hitl._policy_agents SESSION STORE``: ask as me
    import sys

    from intermission.cli import cli_actor
    from intermission.stores import open_store

    sid, url = sys.argv[1], sys.argv[2]
    store = open_store(url)
    session = InMemoryAgentSession.of(sid)
    deploy_agent().prompt("deploy to prod").session(session).principal(cli_actor()).call()
    store.save(session)
    store.close()
