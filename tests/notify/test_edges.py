"""Notifications at the edges (issue 39): a captured webhook replayed with a fresh key, a
receiver that trickles its answer, line separators in an e-mail's headers, a message no
server can carry, two dispatchers and one body per key, ``serve --notify`` and the file's
``public_url``. Every receiver here is real (HTTP on 127.0.0.1, SMTP by aiosmtpd)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module
from tests.notify._receivers import SECRET, Mailbox, Receiver, Served, Trickler, readme_verify
from tests.notify.test_delivery_faults import opened, where  # noqa: F401 (a fixture)

from intermission import (
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    decide_graph,
    tool,
)
from intermission.notify import Email, Notifier, Webhook, verify
from intermission.stores import MemoryStore, SQLiteStore
from intermission.testing.conformance import paused_change, paused_ops

PUBLIC = "https://review.example.com"


def paused_on(args: dict[str, Any], session_id: str = "t-1", notify_args: Any = True) -> Any:
    """A session paused on a ``configure(env, settings)`` call with these arguments."""

    @tool
    def configure(env: str, settings: dict[str, Any]) -> str:
        """Apply settings to an environment."""
        return "ok"

    model = ScriptedModel([[ToolCall("configure", args)], "Done."])
    agent = (
        ReActAgent.of(model).name("ops").tools(configure)
        .interceptor(HITLInterceptor().on_tool("configure", notify_args=notify_args)).build()
    )  # fmt: skip
    session = InMemoryAgentSession.of(session_id)
    agent.prompt("configure prod").session(session).call()
    assert session.is_pending
    return session


# -- the signature covers the key ----------------------------------------------------------
def test_a_captured_webhook_replayed_with_a_fresh_idempotency_key_is_refused(
    receiver: Receiver,
) -> None:
    store = MemoryStore(outbox=True)
    store.save(paused_ops("replay-1"))
    assert Notifier(store, [Webhook(receiver.url + "/hook", secret=SECRET)]).deliver_pending() == 1
    ((body, headers),) = receiver.raw
    recipe = readme_verify()
    assert verify(SECRET, body, headers) and recipe(SECRET.encode(), body, headers)
    # the attacker sends the captured request again, under a key the receiver never saw
    replayed = {**headers, "Idempotency-Key": "ntf_" + "0" * 32}
    assert not verify(SECRET, body, replayed)
    assert not recipe(SECRET.encode(), body, replayed)
    without = {k: v for k, v in headers.items() if k != "Idempotency-Key"}
    assert not verify(SECRET, body, without) and not recipe(SECRET.encode(), body, without)


# -- timeout_s bounds the attempt; targets are independent -----------------------------------
def test_a_trickling_receiver_is_cut_at_timeout_s_and_holds_no_other_target_back(
    tmp_path: Path, receiver: Receiver
) -> None:
    trickler = Trickler(every_s=0.5)  # 41 bytes: about 20 s for the whole answer
    seen_while_trickling: list[bool] = []
    receiver.on_request = lambda _: seen_while_trickling.append(not trickler.closed.is_set())
    try:
        store = SQLiteStore(tmp_path / "s.db", outbox=True)
        store.save(paused_ops("slow-1"))
        slow = Webhook(trickler.url, secret=SECRET, name="slow", timeout_s=1)
        fast = Webhook(receiver.url + "/hook", secret=SECRET, name="fast", timeout_s=1)
        notifier = Notifier(store, [slow, fast], PUBLIC, retry_first_s=60)
        assert notifier.deliver_pending() == 0  # the slow one failed: it comes back later
        (row,) = store.outbox.rows()
        # the fast target had it while the slow one was still trickling, and keeps it
        assert receiver.total() == 1 and seen_while_trickling == [True]
        assert row.done == ("fast",) and trickler.connections == 1
        error = row.last_error or ""
        assert error.startswith("slow: could not reach the receiver (ReadTimeout)"), error
        assert "no complete answer within timeout_s=1" in error
        spent = float(re.search(r"the attempt ended after ([0-9.]+) s", error).group(1))  # type: ignore[union-attr]
        assert spent < 4  # the answer takes about 20 s; the bound is 1 s (generous here)
        notifier.close()
        store.close()
    finally:
        trickler.stop()


class Ending(Webhook):
    """A webhook that counts its attempts as they end (what the dispatcher waited on)."""

    ended = 0

    def send(self, n: Any) -> None:
        try:
            super().send(n)
        finally:
            type(self).ended += 1


def test_a_slow_target_does_not_hold_back_the_next_notifications_to_another(
    tmp_path: Path, receiver: Receiver
) -> None:
    trickler = Trickler(every_s=0.5)
    slow_attempts_over: list[int] = []
    receiver.on_request = lambda _: slow_attempts_over.append(Ending.ended)
    try:
        store = SQLiteStore(tmp_path / "s.db", outbox=True)
        for i in range(3):
            store.save(paused_ops(f"many-{i}"))
        Ending.ended = 0
        slow = Ending(trickler.url, secret=SECRET, name="slow", timeout_s=3)
        fast = Webhook(receiver.url + "/hook", secret=SECRET, name="fast")
        notifier = Notifier(store, [slow, fast], PUBLIC, retry_first_s=60)
        assert notifier.deliver_pending() == 0
        # all three reached the fast target before the slow one's first attempt ended
        assert receiver.total() == 3 and slow_attempts_over == [0, 0, 0]
        rows = store.outbox.rows()
        assert len(rows) == 3 and {r.done for r in rows} == {("fast",)}
        assert Ending.ended == 3  # each slow attempt ended (cut at its timeout_s)
        notifier.close()
        store.close()
    finally:
        trickler.stop()


def test_a_trickling_smtp_server_is_cut_at_timeout_s() -> None:
    trickler = Trickler(every_s=0.5, smtp=True)  # a greeting of 30 bytes: about 15 s
    try:
        store = MemoryStore(outbox=True)
        store.save(paused_ops("smtp-slow"))
        email = Email(("127.0.0.1", trickler.port), sender="im@example.com",
                      to=["ops@example.com"], timeout_s=1, name="mail")  # fmt: skip
        assert Notifier(store, [email], PUBLIC, retry_first_s=60).deliver_pending() == 0
        (row,) = store.outbox.rows()
        error = row.last_error or ""
        assert error.startswith("mail: could not reach the SMTP server"), error
        assert "no complete answer within timeout_s=1" in error
        spent = float(re.search(r"the attempt ended after ([0-9.]+) s", error).group(1))  # type: ignore[union-attr]
        assert spent < 4
    finally:
        trickler.stop()


# -- e-mail: what a header cannot hold is escaped; what cannot be sent is dead at once ------
def test_a_line_separator_in_an_argument_is_escaped_in_the_subject_and_the_mail_goes(
    mailbox: Mailbox,
) -> None:
    store = MemoryStore(outbox=True)
    store.save(paused_on({"env": "prod\u2028Bcc: evil@example.com", "settings": {}}, "ls-1"))
    email = Email(("127.0.0.1", mailbox.port), sender="im@example.com", to=["ops@example.com"])
    assert Notifier(store, [email], PUBLIC).deliver_pending() == 1
    ((rcpts, msg),) = mailbox.messages
    assert rcpts == ["ops@example.com"] and msg["Bcc"] is None
    subject = str(msg["Subject"])
    assert "prod\\u2028Bcc: evil@example.com" in subject and "\u2028" not in subject
    assert store.outbox.rows() == []


def test_a_line_separator_in_a_reviewer_name_is_refused_and_the_decision_is_told(
    mailbox: Mailbox,
) -> None:
    """A name with U+2028/U+0085/U+2029 never reaches a header: the name rules (R60) refuse
    it at the decision, nothing is queued; the same decision under a plain name is told."""
    from intermission import PrincipalNameError

    store = MemoryStore(outbox=True)
    s = paused_change("ls-2")
    store.save(s)
    s = store.load("ls-2")
    before = s.to_json()
    with pytest.raises(PrincipalNameError):
        decide_graph(s, "APPROVE", reviewer="ann\u2028lee\u0085x\u2029y")
    assert s.to_json() == before
    decide_graph(s, "APPROVE", reviewer="ann lee")
    store.save(s)
    email = Email(("127.0.0.1", mailbox.port), sender="im@example.com", to=["ops@example.com"],
                  kinds=["decided"])  # fmt: skip
    assert Notifier(store, [email], PUBLIC).deliver_pending() >= 1
    (subject,) = [str(m["Subject"]).strip() for _, m in mailbox.messages]
    assert subject.startswith("Decided: approve by ann lee"), subject
    assert [r.kind for r in store.outbox.rows()] == []


def test_a_message_the_server_cannot_carry_is_dead_at_once_with_its_reason() -> None:
    need_module("aiosmtpd", "the email tests need aiosmtpd (extra dev)")
    mailbox = Mailbox(smtputf8=False)
    store = MemoryStore(outbox=True)
    store.save(paused_ops("utf-1"))
    # a sender the server cannot take (no SMTPUTF8): every attempt would fail the same way
    email = Email(("127.0.0.1", mailbox.port), sender="relé@example.com", to=["ops@example.com"])
    notifier = Notifier(store, [email], PUBLIC, max_attempts=8, retry_first_s=0.01)
    assert notifier.deliver_pending() == 0
    (row,) = store.outbox.rows()
    assert row.status == "dead" and row.attempts == 1, row
    assert "SMTPUTF8" in (row.last_error or "") and mailbox.messages == []
    mailbox.stop()


def test_an_email_that_cannot_be_built_is_a_permanent_error_naming_why() -> None:
    from intermission.errors import DeliveryError
    from intermission.notify.notification import Notification

    store = MemoryStore(outbox=True)
    store.save(paused_ops("nb-1"))
    (row,) = store.outbox.rows()
    n = Notification.of(row, PUBLIC)
    email = Email(("127.0.0.1", 9), sender="im@example.com", to=["ops@example.com"])
    # a reviewer-facing text no header can carry even escaped: a lone surrogate in a key
    broken = Notification(**{**n.__dict__, "key": "ntf_\ud800", "fixed_body": None})
    with pytest.raises(DeliveryError) as caught:
        email.send(broken)
    assert caught.value.permanent and "cannot be built" in str(caught.value)


# -- one body per key ------------------------------------------------------------------------
def test_two_dispatchers_with_different_public_urls_send_one_body_per_key(
    where: str,  # noqa: F811
    receiver: Receiver,
) -> None:
    store = opened(where, outbox=True)
    store.save(paused_ops("one-body"))  # written before any dispatcher said where links go
    receiver.status = 503
    first = Notifier(opened(where), [Webhook(receiver.url + "/hook", secret=SECRET, name="h")],
                     "https://first.example", retry_first_s=0.01)  # fmt: skip
    assert first.deliver_pending() == 0
    receiver.status = 200
    second = Notifier(opened(where), [Webhook(receiver.url + "/hook", secret=SECRET, name="h")],
                      "https://second.example", retry_first_s=0.01)  # fmt: skip
    (row,) = store.outbox.rows()
    store.outbox.retry(row.key)
    assert second.deliver_pending() == 1
    (a, _), (b, _) = receiver.raw
    assert a == b and b'"link":"https://first.example/#thread=one-body' in a
    # from now on the body is fixed by the save itself, under the URL last recorded
    later = opened(where)
    later.save(paused_ops("later"))
    (row,) = later.outbox.rows()
    assert row.payload["body"]["link"].startswith("https://second.example/#thread=later")
    for n in (first, second):
        n.close()
        n.store.close()
    for opened_store in (store, later):
        opened_store.close()


# -- serve --notify: the flag, else the file, else its own URL ---------------------------------
def test_serve_notify_links_under_the_files_public_url_unless_the_flag_says_otherwise(
    tmp_path: Path, receiver: Receiver
) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    config = tmp_path / "notify.yaml"
    config.write_text(
        textwrap.dedent(f"""
        public_url: https://from-the-file.example
        poll_s: 30
        targets:
          - {{type: webhook, url: "{receiver.url}/hook", secret_env: IM_HOOK_SECRET}}
    """)
    )
    env = {"IM_HOOK_SECRET": SECRET}
    links = []
    for name, extra in (("file", ()), ("flag", ("--public-url", "https://from-the-flag.example"))):
        server = Served(str(tmp_path / f"{name}.db"), config, tmp_path / f"{name}.log", env,
                        *extra)  # fmt: skip
        try:
            server.pause(f"t-{name}")
            expected = len(links) + 1
            deadline_wait(lambda expected=expected: receiver.total() == expected)
            links.append(receiver.bodies[-1]["link"])
        finally:
            server.stop()
    assert links[0].startswith("https://from-the-file.example/#thread=t-file&interrupt=")
    assert links[1].startswith("https://from-the-flag.example/#thread=t-flag&interrupt=")


def deadline_wait(check: Any) -> None:
    from tests.notify._receivers import wait_until

    wait_until(check, timeout_s=30, what="the notification")
