"""Secrets stay out of notifications where the first redaction missed them (issue 39,
attacked): a graph approval's reason, a tool's name, and a long argument cut in the middle
of a URL's password — through a real webhook receiver and a real SMTP server, on every
store."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.notify._receivers import SECRET, Mailbox, Receiver

from intermission import (
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    examples,
    tool,
)
from intermission.notify import Email, Notifier, SlackWebhook, Webhook

PUBLIC = "https://review.example.com"
PEM = "-----BEGIN PRIVATE KEY-----\n" + "A" * 700 + "\n-----END PRIVATE KEY-----"
# after the key (redacted to a few characters), the 800th character falls inside the
# password: the part kept of the value ends with ``postgresql://app:hunter2-long-passw``
LONG = PEM + " x" * 5 + " postgresql://app:hunter2-long-password-9999@db.internal/app"
LEAKS = ["PGPASSWORD=hunter3", "hunter3", "sk_live_51HxAbCdEfGh0123", "hunter2"]


def _paused_on_a_secret_named_tool() -> InMemoryAgentSession:
    def deploy(note: str) -> str:
        """Deploy."""
        return "ok"

    deploy.__name__ = deploy.__qualname__ = "deploy_sk_live_51HxAbCdEfGh0123"
    deployer = tool(deploy)
    name = "deploy_sk_live_51HxAbCdEfGh0123"
    model = ScriptedModel([[ToolCall(name, {"note": LONG})], "Done."])
    agent = (
        ReActAgent.of(model).name("ops").tools(deployer)
        .interceptor(HITLInterceptor().on_tool(name)).build()
    )  # fmt: skip
    session = InMemoryAgentSession.of("sec-tool")
    agent.prompt("deploy").session(session).call()
    assert session.is_pending
    return session


def _paused_with_a_secret_reason(monkeypatch: pytest.MonkeyPatch) -> InMemoryAgentSession:
    """A graph approval whose pause reason (a node's words) carries a password."""

    def approval(ctx: Any, node: Any) -> None:
        ctx.put("approval.request", ctx.get("change.proposal"))
        ctx.session.pending(True, "approve: PGPASSWORD=hunter3 psql -h db")

    monkeypatch.setattr(examples, "change_approval_task", approval)
    session = InMemoryAgentSession.of("sec-reason")
    examples.build_change_graph().prompt("Upgrade").session(session).call()
    assert session.is_pending
    return session


def test_no_secret_in_a_reason_a_tool_name_or_a_cut_value_reaches_any_receiver(
    make_store: Any, receiver: Receiver, mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(outbox=True)
    store.save(_paused_on_a_secret_named_tool())
    store.save(_paused_with_a_secret_reason(monkeypatch))
    targets = [
        Webhook(receiver.url + "/hook", secret=SECRET),
        SlackWebhook(receiver.url + "/slack"),
        Email(("127.0.0.1", mailbox.port), sender="im@example.com", to=["ops@example.com"]),
    ]
    assert Notifier(store, targets, PUBLIC).deliver_pending() == 2
    assert len(receiver.raw) == len(receiver.slack) == len(mailbox.messages) == 2
    told = {
        "webhook": b"".join(body for body, _ in receiver.raw).decode(),
        "slack": json.dumps(receiver.slack, ensure_ascii=False),
        "email": "".join(m.as_string() for _, m in mailbox.messages),
    }
    for where, text in told.items():
        for leak in LEAKS:
            assert leak not in text, (where, leak)
    bodies = [json.loads(body) for body, _ in receiver.raw]
    (reason,) = [b for b in bodies if b["session"]["id"] == "sec-reason"]
    assert reason["interrupts"][0]["reason"] == "approve: PGPASSWORD=[redacted] psql -h db"
    (named,) = [b for b in bodies if b["session"]["id"] == "sec-tool"]
    assert named["interrupts"][0]["tool"] == "deploy_[redacted]"
    assert named["interrupts"][0]["arguments"]["note"].startswith("[redacted] x x x x x")
