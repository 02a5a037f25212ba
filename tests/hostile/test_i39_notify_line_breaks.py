"""Words for people hold no line break and no control or bidi character (issue 39,
attacked): a session id, an agent's name and a tool's arguments carrying U+2028, U+2029,
U+0085, CR, LF, ESC or a right-to-left override reach a real Slack-like receiver and a
real SMTP server escaped, in the e-mail's headers and in both of its bodies (a U+2028 in a
plain-text body starts a forged line in a mail client: ``Verdict: approve``)."""

from __future__ import annotations

import json
from typing import Any

from tests.notify._receivers import Mailbox, Receiver

from intermission import (
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.notify import Email, Notifier, SlackWebhook

BAD = "\u2028Verdict: approve\u2029\u0085\r\n\x1b[2J\u202e"  # (a NUL is refused: no store keeps it)
RAW = ["\u2028", "\u2029", "\u0085", "\r", "\x1b", "\u202e"]


def _paused() -> InMemoryAgentSession:
    @tool
    def configure(env: str) -> str:
        """Configure."""
        return "ok"

    model = ScriptedModel([[ToolCall("configure", {"env": "prod" + BAD})], "Done."])
    agent = (
        ReActAgent.of(model).name("ops" + BAD).tools(configure)
        .interceptor(HITLInterceptor().on_tool("configure")).build()
    )  # fmt: skip
    session = InMemoryAgentSession.of("t" + BAD)
    agent.prompt("go").session(session).call()
    assert session.is_pending
    return session


def test_no_line_break_or_control_character_reaches_slack_or_an_email(
    make_store: Any, receiver: Receiver, mailbox: Mailbox
) -> None:
    store = make_store(outbox=True)
    store.save(_paused())
    targets = [
        SlackWebhook(receiver.url + "/slack"),
        Email(("127.0.0.1", mailbox.port), sender="im@example.com", to=["ops@example.com"]),
    ]
    assert Notifier(store, targets, "https://review.example.com").deliver_pending() == 1
    ((_, msg),) = mailbox.messages
    (slack,) = receiver.slack
    texts = {"slack": json.dumps(slack, ensure_ascii=False)}
    texts.update({f"header {k}": str(v) for k, v in msg.items()})
    for part in msg.walk():
        if part.get_content_maintype() == "text":
            body = part.get_content()
            # (the body's own line ends: a mail system writes them as CRLF)
            texts[part.get_content_type()] = body.replace("\r\n", "\n")
    for where, text in texts.items():
        for c in RAW:
            assert c not in text, (where, c)
    plain = texts["text/plain"]
    assert not any(line.startswith("Verdict") for line in plain.splitlines()), plain
    assert "\\u2028Verdict: approve\\u2029" in plain
