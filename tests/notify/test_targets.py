"""Each target speaks its real protocol to a real server on 127.0.0.1: a signed webhook
(checked with the README's recipe), a Slack-compatible message, email over SMTP (aiosmtpd,
with and without STARTTLS and a login); routing by kind and role; the config file; typed
delivery errors logged without bodies or secrets."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module
from tests.notify._receivers import SECRET, Mailbox, Receiver, readme_verify

from intermission import (
    DeliveryRefusedError,
    DeliveryUnreachableError,
    InMemoryAgentSession,
    NotifyConfigError,
)
from intermission.examples import build_ops_agent
from intermission.notify import (
    Email,
    Notification,
    Notifier,
    SlackWebhook,
    Webhook,
    load_config,
    notifier_from,
    verify,
)
from intermission.stores import MemoryStore
from intermission.testing.conformance import paused_change, paused_ops

PUBLIC = "https://review.example.com"


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    need_module("httpx", "the HTTP targets need httpx (extra notify)")
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def fresh(receiver: Receiver) -> Receiver:
    receiver.keys.clear()
    receiver.bodies.clear()
    receiver.slack.clear()
    receiver.headers.clear()
    receiver.bad, receiver.status, receiver.on_request = 0, 200, None
    return receiver


def with_roles(session: InMemoryAgentSession, roles: list[str]) -> InMemoryAgentSession:
    """Give the session's tasks an approval policy naming ``roles`` (a field of the task,
    as ``on_tool(policy=)`` gives it)."""
    from intermission import ApprovalPolicy

    policy = ApprovalPolicy(roles=frozenset(roles))
    tasks = session.hitl.tasks
    tasks[:] = [t.model_copy(update={"policy": policy}) for t in tasks]
    return session


def test_a_webhook_is_signed_keyed_and_verifiable_by_the_readme_recipe(fresh: Receiver) -> None:
    store = MemoryStore(outbox=True)
    s = InMemoryAgentSession.of("ticket-42")
    build_ops_agent().prompt("Please delete user 1001").session(s).call()
    store.save(s)
    (row,) = store.outbox.rows()
    notifier = Notifier(store, [Webhook(fresh.url + "/hook", secret=SECRET)], PUBLIC)
    assert notifier.deliver_pending() == 1 and notifier.deliver_pending() == 0
    assert fresh.bad == 0 and len(fresh.bodies) == 1
    (body,), (headers,) = fresh.bodies, fresh.headers
    assert headers["Idempotency-Key"] == body["key"] == row.key
    assert store.outbox.rows() == []  # delivered: it left the outbox
    (task,) = s.hitl.tasks
    link = f"{PUBLIC}/#thread=ticket-42&interrupt={task.call_uuid}"
    assert body["type"] == "intermission.notification" and body["version"] == 1
    assert body["kind"] == "pending" and body["session"] == {"id": "ticket-42", "agent": "ops"}
    (interrupt,) = body["interrupts"]
    assert interrupt["tool"] == "delete_user" and interrupt["arguments"] == {"user_id": 1001}
    assert interrupt["link"] == body["link"] == link
    assert body["created_at"].endswith("Z") and body["deadline_at"] is None


def test_the_signature_recipe_refuses_a_tampered_body_a_wrong_secret_and_a_replay() -> None:
    recipe = readme_verify()
    body = b'{"key":"ntf_1","kind":"pending"}'
    stamp = str(int(time.time()))
    from intermission.notify.signing import sign

    headers = {"Intermission-Timestamp": stamp, "Intermission-Signature": sign(SECRET, stamp, body),
               "Idempotency-Key": "ntf_1"}  # fmt: skip
    assert recipe(SECRET.encode(), body, headers) and verify(SECRET, body, headers)
    assert not recipe(SECRET.encode(), body.replace(b"pending", b"decided"), headers)
    assert not recipe(b"another-secret-0123456789", body, headers)
    old = str(int(time.time()) - 301)
    replayed = {"Intermission-Timestamp": old, "Intermission-Signature": sign(SECRET, old, body),
                "Idempotency-Key": "ntf_1"}  # fmt: skip
    assert not recipe(SECRET.encode(), body, replayed) and not verify(SECRET, body, replayed)
    assert not recipe(SECRET.encode(), body, {}) and not verify(SECRET, body, {})
    # header names in any case (HTTP/2, API gateways and ASGI lower-case them), and a
    # hostile value is a refusal, never a crash, in the recipe as in the library's check
    lower = {k.lower(): v for k, v in headers.items()}
    assert verify(SECRET, body, lower) and recipe(SECRET.encode(), body, lower)
    for stamp_value, signature in (("\u00b2", "v1=00"), (stamp, "v1=\u00e9")):
        odd = {"intermission-timestamp": stamp_value, "intermission-signature": signature}
        assert not recipe(SECRET.encode(), body, odd) and not verify(SECRET, body, odd)


def test_a_slack_message_has_text_blocks_and_a_button_to_the_interrupt(fresh: Receiver) -> None:
    store = MemoryStore(outbox=True)
    s = paused_ops("t-9")
    s.pending(True, "<!channel> click <https://evil.example|here> & see")  # from a model
    store.save(s)
    Notifier(store, [SlackWebhook(fresh.url + "/slack")], PUBLIC).deliver_pending()
    (message,) = fresh.slack
    assert set(message) == {"text", "blocks"}
    assert [b["type"] for b in message["blocks"]] == ["header", "section", "context", "actions"]
    shown = json.dumps(message)
    assert "<!channel>" not in shown and "<https://evil" not in shown  # escaped, stays text
    assert "&lt;!channel&gt;" in message["blocks"][1]["text"]["text"]
    (button,) = message["blocks"][3]["elements"]
    (task,) = s.hitl.tasks
    assert button["type"] == "button"
    assert button["url"] == f"{PUBLIC}/#thread=t-9&interrupt={task.call_uuid}"
    assert message["text"].startswith("Approval needed: delete_user(user_id=1001) in session t-9")


def test_a_slack_message_of_a_graph_approval_and_of_a_decision(fresh: Receiver) -> None:
    from intermission import decide_graph

    store = MemoryStore(outbox=True)
    store.save(paused_change("c"))
    s = store.load("c")
    decide_graph(s, "REJECT", reviewer="bob", reason="not on a Friday")
    store.save(s)
    Notifier(store, [SlackWebhook(fresh.url + "/slack")], None).deliver_pending()
    texts = sorted(m["text"] for m in fresh.slack)
    assert texts[0].startswith("Approval needed: Upgrade order-service")
    assert texts[1].startswith("Decided: reject by bob")
    assert all(
        b["type"] != "actions" for m in fresh.slack for b in m["blocks"]
    )  # no URL: no button


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    need_module("aiosmtpd", "the email tests need aiosmtpd (extra dev)")
    box = Mailbox()
    yield box
    box.stop()


def test_an_email_goes_to_the_roles_that_may_decide_with_text_html_and_the_link(
    mailbox: Mailbox,
) -> None:
    mailbox.messages.clear()
    store = MemoryStore(outbox=True)
    store.save(with_roles(paused_ops("pay-7"), ["finance"]))
    store.save(paused_ops("open-8"))  # no roles: anyone may decide, everyone is told
    (row,) = [r for r in store.outbox.rows() if r.session_id == "pay-7"]
    roles = {"finance": ["cfo@example.com"], "sre": ["sre@example.com"]}
    email = Email(
        ("127.0.0.1", mailbox.port), sender="im@example.com", to=["log@example.com"], to_roles=roles
    )
    assert Notifier(store, [email], PUBLIC).deliver_pending() == 2
    got = {msg["Subject"].split()[-1]: (rcpts, msg) for rcpts, msg in mailbox.messages}
    assert sorted(got["pay-7"][0]) == ["cfo@example.com", "log@example.com"]
    assert sorted(got["open-8"][0]) == ["cfo@example.com", "log@example.com", "sre@example.com"]
    msg = got["pay-7"][1]
    assert msg["Message-ID"] == f"<{row.key}@intermission>"
    assert msg["Subject"] == "Approval needed: delete_user(user_id=1001) in session pay-7"
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    link = row.payload["tasks"][0]["call_uuid"]
    assert f"{PUBLIC}/#thread=pay-7&amp;interrupt={link}" in html
    assert f"open: {PUBLIC}/#thread=pay-7&interrupt={link}" in text
    assert "still needed: 1 approval(s) from finance" in text


def test_an_email_over_starttls_with_a_login(tmp_path: Path, caplog: Any) -> None:
    need_module("aiosmtpd", "the email tests need aiosmtpd (extra dev)")
    need_module("trustme", "the STARTTLS test needs trustme (extra dev)")
    import ssl

    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    box = Mailbox(tls_context=server_ctx, logins={"im": "pa55-w0rd-xyz"})
    caplog.set_level(logging.DEBUG)
    try:
        store = MemoryStore(outbox=True)
        store.save(paused_ops("tls"))
        n = Notification.of(store.outbox.rows()[0], None)
        good = Email(("127.0.0.1", box.port), sender="im@example.com", to=["a@example.com"],
                     starttls=True, username="im", password="pa55-w0rd-xyz",
                     ssl_context=client_ctx)  # fmt: skip
        plain = Email(("127.0.0.1", box.port), sender="im@example.com", to=["a@example.com"],
                      name="no-tls")  # fmt: skip
        # the server requires STARTTLS: a target without it is refused, typed, and retried
        with pytest.raises(DeliveryRefusedError) as refused:
            plain.send(n)
        assert refused.value.status == 530 and refused.value.target == "no-tls"
        assert Notifier(store, [good]).deliver_pending() == 1
        ((rcpts, msg),) = box.messages
        assert rcpts == ["a@example.com"] and "delete_user" in msg["Subject"]
        wrong = Email(("127.0.0.1", box.port), sender="im@example.com", to=["a@example.com"],
                      starttls=True, username="im", password="wrong-password",
                      ssl_context=client_ctx)  # fmt: skip
        with pytest.raises(DeliveryRefusedError) as denied:
            wrong.send(n)
        assert denied.value.status == 535
        assert "wrong-password" not in str(denied.value) + caplog.text
        assert "pa55-w0rd-xyz" not in caplog.text
    finally:
        box.stop()


def test_routing_by_kind_and_by_role(fresh: Receiver) -> None:
    store = MemoryStore(outbox=True)
    store.save(with_roles(paused_ops("fin"), ["finance"]))
    store.save(with_roles(paused_ops("ops"), ["sre"]))
    store.save(paused_ops("any"))
    hooks = [
        Webhook(fresh.url + "/finance", secret=SECRET, name="finance", roles=["finance"]),
        Webhook(fresh.url + "/decided", secret=SECRET, name="decisions", kinds=["decided"]),
    ]
    Notifier(store, hooks).deliver_pending()
    assert sorted(b["session"]["id"] for b in fresh.bodies) == ["any", "fin"]
    assert store.outbox.rows() == []  # each went where it was routed, or nowhere


def test_delivery_errors_are_typed_and_logged_without_bodies_or_secrets(
    fresh: Receiver, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx's too
    store = MemoryStore(outbox=True)
    s = paused_ops("err")
    s.pending(True, "a reason nobody should see in a log")
    store.save(s)
    (row,) = store.outbox.rows()
    n = Notification.of(row, PUBLIC)
    fresh.status = 503
    hook = Webhook(fresh.url + "/hook?token=url-secret-123", secret=SECRET, name="ops-hook")
    with pytest.raises(DeliveryRefusedError) as refused:
        hook.send(n)
    assert refused.value.status == 503 and refused.value.key == row.key
    assert str(refused.value) == "ops-hook: the receiver answered HTTP 503"
    gone = Webhook("http://127.0.0.1:9/hook", secret=SECRET, name="gone", timeout_s=2)
    with pytest.raises(DeliveryUnreachableError, match="gone: could not reach the receiver"):
        gone.send(n)
    notifier = Notifier(store, [hook, gone], PUBLIC, retry_first_s=60)
    assert notifier.deliver_pending() == 0
    (failed,) = store.outbox.rows()
    assert (
        failed.status == "pending" and failed.attempts == 1 and failed.due_ms > time.time() * 1000
    )
    assert "HTTP 503" in (failed.last_error or "") and "ConnectError" in (failed.last_error or "")
    for secret in (SECRET, "url-secret-123", "a reason nobody", "delete_user", fresh.url):
        assert secret not in caplog.text
    assert f"notification {row.key} attempt 1 failed" in caplog.text


def test_the_config_file_reads_secrets_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: Receiver
) -> None:
    monkeypatch.setenv("IM_TEST_SECRET", SECRET)
    (tmp_path / "slack-url").write_text(fresh.url + "/slack\n")
    config = tmp_path / "notify.yaml"
    config.write_text(f"""
public_url: {PUBLIC}
poll_s: 0.5
max_attempts: 3
targets:
  - type: webhook
    name: hook
    url: {fresh.url}/hook
    secret_env: IM_TEST_SECRET
    kinds: [pending]
  - type: slack
    url_file: {tmp_path / "slack-url"}
  - type: email
    smtp: {{host: 127.0.0.1, port: 2525}}
    sender: im@example.com
    to_roles: {{finance: [cfo@example.com]}}
""")
    loaded = load_config(config)
    assert loaded.poll_s == 0.5 and loaded.max_attempts == 3
    store = MemoryStore(outbox=True)
    notifier = notifier_from(store, config)
    assert [type(t).__name__ for t in notifier.targets] == ["Webhook", "SlackWebhook", "Email"]
    assert notifier.public_url == PUBLIC and notifier.poll_s == 0.5 and notifier.max_attempts == 3
    (tmp_path / "notify.json").write_text(json.dumps({"targets": [
        {"type": "webhook", "url": fresh.url + "/hook", "secret_file": str(tmp_path / "slack-url")}
    ]}))  # fmt: skip
    assert len(notifier_from(store, tmp_path / "notify.json").targets) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("targets:\n  - {type: webhook, url: 'https://h.example', secret: s3cret-in-the-file}",
         "secret is not written in the config file"),
        ("targets:\n  - {type: webhook, url: 'https://h.example', secret_env: IM_NOT_SET_X}",
         "the environment variable IM_NOT_SET_X is not set"),
        ("targets:\n  - {type: webhook, url: 'https://h.example', secret_env: HOME, colour: 1}",
         "Extra inputs are not permitted"),
        ("targets:\n  - {type: pager, url: 'https://h.example'}",
         "does not match any of the expected tags"),
        ("targets: []", "at least 1 item"),
        ("targets:\n  - {type: slack, url: 'https://h.example', kinds: [lunch]}",
         "kinds are some of"),
        ("targets:\n  - {type: email, smtp: {host: h, password: pw}, sender: a@b.c, to: [x@y.z]}",
         "password is not written in the config file"),
        ("targets:\n  - {type: email, smtp: {host: h}, sender: a@b.c}", "needs addresses"),
        ("public_url: ftp://x\ntargets:\n  - {type: slack, url: 'https://h.example'}",
         "public_url is an http(s) URL"),
        ("targets: [unclosed", "not valid YAML"),
        # the secret itself pasted where its variable's name or file goes: never echoed
        ("targets:\n  - {type: slack, url_env: 'https://hooks.example/s3cret-in-the-file'}",
         "url_env takes the name of an environment variable"),
        ("targets:\n  - {type: webhook, url: 'https://h.example', "
         "secret_env: whsec_s3cret-in-the-file}", "secret_env takes the name"),
        ("targets:\n  - {type: webhook, url: 'https://h.example', "
         "secret_env: whsec_s3cret_in_the_file}", "the environment variable it names"),
        ("targets:\n  - {type: webhook, url: 'https://h.example', "
         "secret_file: s3cret-in-the-file}", "cannot read the file secret_file names"),
    ],
)  # fmt: skip
def test_a_wrong_config_is_a_typed_error_naming_the_field_never_the_secret(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "notify.yaml"
    config.write_text(text)
    with pytest.raises(NotifyConfigError) as caught:
        notifier_from(MemoryStore(outbox=True), config)
    assert message in str(caught.value) and str(config) in str(caught.value)
    for secret in ("s3cret-in-the-file", "s3cret_in_the_file"):
        assert secret not in str(caught.value)
    assert "pw" not in caught.value.where


def test_a_target_url_httpx_spells_otherwise_is_still_kept_out_of_the_log(
    fresh: Receiver, caplog: Any
) -> None:
    # httpx logs each request's URL as it normalises it (host lower-cased, a default port
    # dropped, non-ASCII percent-quoted): a credential in it must stay out of the log too
    caplog.set_level(logging.DEBUG)
    store = MemoryStore(outbox=True)
    store.save(paused_ops("spelt"))
    url = f"http://127.0.0.1:{fresh.port}/hook?token=s\u00e9cret-in-url"
    assert Notifier(store, [Webhook(url, secret=SECRET, name="hook")]).deliver_pending() == 1
    assert len(fresh.bodies) == 1
    for leaked in ("cret-in-url", "s%C3%A9cret", f"127.0.0.1:{fresh.port}/hook"):
        assert leaked not in caplog.text
    assert "delivered to hook" in caplog.text


@pytest.mark.parametrize("port", ["8o80", "99999", "0"])
def test_a_url_whose_port_is_no_port_is_refused_when_the_target_is_made(port: str) -> None:
    url = f"https://hooks.example.com:{port}/im"
    for make in (lambda: Webhook(url, secret=SECRET), lambda: SlackWebhook(url)):
        with pytest.raises(NotifyConfigError, match="is an http"):
            make()
