"""One step of a session's life in a process of its own, traced to a JSON-lines file:
``python tests/otel/_proc.py STEP STORE SESSION SPANS [ARG]``.

Steps: ``pause`` (a new request that pauses on a transfer approval, saved), ``resume``
(approve — or ``reject``/``skip`` as ARG — and resume under the store's claim),
``crash`` (approve and resume on a loaded copy, then SIGKILL before the save: the
transfer ran and its ledger entry is stored, the session is not), ``fork`` (fork the
stored session as ARG and resume the fork). The transfer tool appends to
``STORE.transfers`` every time it really runs.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (the repository: tests.*)


def main() -> None:
    step, store_path, sid, spans_path = sys.argv[1:5]
    arg = sys.argv[5] if len(sys.argv) > 5 else ""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from tests.otel._spans import JsonLinesExporter

    import intermission.otel
    from intermission import (
        HITL,
        HITLDecision,
        HITLInterceptor,
        ReActAgent,
        ScriptedModel,
        ToolCall,
        tool,
    )
    from intermission.stores import SQLiteStore

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(Path(spans_path))))
    intermission.otel.instrument(provider, experimental=True)
    ran = Path(store_path + ".transfers")

    @tool
    def transfer(account: str, amount: int) -> str:
        """Move money."""
        with ran.open("a") as out:
            out.write(f"{account} {amount}\n")
        return f"sent {amount} to {account}"

    script = [[ToolCall("transfer", {"account": "alice", "amount": 500}, "call_t")], "Paid."]
    agent = (
        ReActAgent.of(ScriptedModel(script)).name("bank").tools(transfer)
        .interceptor(HITLInterceptor().on_tool("transfer")).build()
    )  # fmt: skip
    store = SQLiteStore(store_path)

    def decide(session: object, verdict: str) -> None:
        task = HITL.pending_tasks(session)[0]  # type: ignore[arg-type]
        decision = {
            "approve": HITLDecision.approve(),
            "reject": HITLDecision.reject("too much"),
            "skip": HITLDecision.skip(),
        }[verdict]
        HITL.submit(session, task, decision.reviewer("ann"))  # type: ignore[arg-type]

    if step == "pause":
        from intermission import InMemoryAgentSession

        session = InMemoryAgentSession.of(sid)
        agent.prompt("pay alice 500").session(session).call()
        assert session.is_pending
        store.save(session)
    elif step == "resume":
        with store.resume(sid) as session:
            decide(session, arg or "approve")
            agent.prompt().session(session).call()
    elif step == "crash":
        session = store.load(sid)
        decide(session, "approve")
        agent.prompt().session(session).call()
        os.kill(os.getpid(), signal.SIGKILL)  # after the transfer, before any save
    elif step == "fork":
        store.fork(sid, arg)
        with store.resume(arg) as session:
            decide(session, "approve")
            agent.prompt().session(session).call()
    else:
        raise SystemExit(f"unknown step {step!r}")
    provider.shutdown()
    store.close()
    print("OK")


if __name__ == "__main__":
    main()
