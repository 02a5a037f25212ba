"""Two stale copies of one stored session in a process traced from the environment
(``INTERMISSION_OTEL=1``, OTLP/HTTP to the test's receiver):
``python tests/otel/_stale_copies.py STORE SCENARIO SESSION``.

``pause``: the session is stored (new); two copies are loaded and each runs a request
that pauses on a transfer approval; the first copy's save commits, the second's loses
compare-and-set. ``decide``: the session is stored paused; ann approves on one copy, bob
rejects on the other; the first save commits, the second loses. Prints what the store
kept, as JSON: the pause id of its trace record, the decision's reviewer and verdict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (the repository: tests.*)


def main() -> None:
    target, scenario, sid = sys.argv[1:4]
    from intermission import (
        HITL,
        ConflictError,
        HITLDecision,
        HITLInterceptor,
        InMemoryAgentSession,
        ReActAgent,
        ScriptedModel,
        ToolCall,
        tool,
    )
    from intermission.otel.env import configure_from_env
    from intermission.stores import open_store

    assert configure_from_env(one_shot=True)

    @tool
    def transfer(account: str, amount: int) -> str:
        """Move money."""
        return f"sent {amount} to {account}"

    def bank() -> ReActAgent:  # (one per copy: a scripted model is at one place in its script)
        script = [[ToolCall("transfer", {"account": "alice", "amount": 500}, "call_t")], "Paid."]
        return (
            ReActAgent.of(ScriptedModel(script)).name("bank").tools(transfer)
            .interceptor(HITLInterceptor().on_tool("transfer")).build()
        )  # fmt: skip

    store = open_store(target)
    first = InMemoryAgentSession.of(sid)
    if scenario == "decide":
        bank().prompt("pay alice 500").session(first).call()
        assert first.is_pending
    store.save(first)
    a, b = store.load(sid), store.load(sid)  # two stale copies of one stored version
    if scenario == "pause":
        for copy in (a, b):
            bank().prompt("pay alice 500").session(copy).call()
            assert copy.is_pending
    else:
        for copy, decision in ((a, HITLDecision.approve()), (b, HITLDecision.reject("no"))):
            HITL.submit(copy, HITL.pending_tasks(copy)[0], decision.reviewer("x"))
    store.save(a)
    try:
        store.save(b)
    except ConflictError:
        lost = True
    else:
        lost = False
    kept = store.load(sid)
    decisions = [d.verdict for d in kept.hitl.decisions.values()]
    print(json.dumps({
        "lost": lost, "pause": kept.meta.get("otel", {}).get("pause"), "decisions": decisions,
    }))  # fmt: skip
    store.close()


if __name__ == "__main__":
    main()
