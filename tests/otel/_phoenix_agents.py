"""The agent of the Phoenix test, by name for ``python -m intermission --agents
tests.otel._phoenix_agents:AGENTS``; run as a script it pauses a session:
``python tests/otel/_phoenix_agents.py STORE SESSION`` (tracing from the environment)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def bank() -> Any:
    from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool

    @tool
    def transfer(account: str, amount: int) -> str:
        """Move money."""
        return f"sent {amount} to {account}"

    script = [[ToolCall("transfer", {"account": "alice", "amount": 500}, "call_t")], "Paid."]
    return (
        ReActAgent.of(ScriptedModel(script)).name("bank").tools(transfer)
        .interceptor(HITLInterceptor().on_tool("transfer")).build()
    )  # fmt: skip


AGENTS = {"bank": bank}


def pause(store_path: str, sid: str) -> None:
    from intermission import InMemoryAgentSession
    from intermission.otel.env import configure_from_env
    from intermission.stores import SQLiteStore

    assert configure_from_env()
    session = InMemoryAgentSession.of(sid)
    bank().prompt("pay alice 500").session(session).call()
    assert session.is_pending
    store = SQLiteStore(store_path)
    store.save(session)
    store.close()
    print("OK")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    pause(sys.argv[1], sys.argv[2])
