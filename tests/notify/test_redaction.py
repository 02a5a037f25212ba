"""Secrets stay out of notifications (issue 39): every key and value the issue names, through
the webhook, Slack and e-mail as real receivers get them; ``on_tool(notify_args=)``; and a
property: no secret-shaped value survives a summary, at any depth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.notify._receivers import SECRET, Mailbox, Receiver
from tests.notify.test_edges import PUBLIC, paused_on

from intermission import HITLInterceptor
from intermission.notify import Email, Notifier, SlackWebhook, Webhook
from intermission.notify.interrupts import summarize
from intermission.notify.redact import redact, secret_name, userinfo_masked
from intermission.stores import MemoryStore

# the issue's list, each value distinct so that any leak is found by a plain search
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmcmFuayJ9.c2lnbmF0dXJlLXZhbHVl"
SECRETS = {
    "pwd": "pwd-value-7788",
    "dsn": "dsn-value-5511",
    "access_key": "access-value-4432",
    "ssh_key": "ssh-value-9012",
    "jwt": "jwt-value-6543",
    "bearer": "bearer-value-3321",
    "client_key": "client-value-8876",
    "DATABASE_URL": "postgresql://app:db-pass-1234@db.internal:5432/app",
}
SHAPED = {  # under names that say nothing: caught by their shape
    "note": "charge with sk_live_51HxAbCdEfGh0123 today",
    "target": "postgresql://app:url-pass-5678@db.internal/app",
    "header": f"Authorization: Bearer {JWT}",
    "ghtoken_like": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "cloud": "AKIAIOSFODNN7EXAMPLE",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7Vx\n"
    "-----END RSA PRIVATE KEY-----",
}
LEAKS = [
    *SECRETS.values(), "db-pass-1234", "url-pass-5678", "sk_live_51HxAbCdEfGh0123", JWT,
    "ghp_abcdefghijklmnopqrstuvwxyz", "AKIAIOSFODNN7EXAMPLE", "MIIEpAIBAAKCAQEA7Vx",
]  # fmt: skip


def test_no_secret_the_issue_names_reaches_a_webhook_slack_or_an_email(
    receiver: Receiver, mailbox: Mailbox
) -> None:
    # (a summary shows 10 keys per level, 3 levels: every one of these is shown, redacted)
    settings_arg = {**SECRETS, "shaped": SHAPED}
    store = MemoryStore(outbox=True)
    store.save(paused_on({"env": "prod", "settings": settings_arg}, "leak-1"))
    store.save(paused_on({"env": SHAPED["target"], "settings": {"x": SHAPED["note"]}}, "leak-2"))
    targets = [
        Webhook(receiver.url + "/hook", secret=SECRET),
        SlackWebhook(receiver.url + "/slack"),
        Email(("127.0.0.1", mailbox.port), sender="im@example.com", to=["ops@example.com"]),
    ]
    assert Notifier(store, targets, PUBLIC).deliver_pending() == 2
    told = {
        "webhook": b"".join(body for body, _ in receiver.raw).decode(),
        "slack": json.dumps(receiver.slack, ensure_ascii=False),
        "email": "".join(m.as_string() for _, m in mailbox.messages),
    }
    assert len(receiver.raw) == len(receiver.slack) == len(mailbox.messages) == 2
    for where, text in told.items():
        for leak in LEAKS:
            assert leak not in text, (where, leak)
    # what stays: the names, the innocent values, where the database is (not who logs in)
    (first, _) = receiver.raw[0] if b"leak-1" in receiver.raw[0][0] else receiver.raw[1]
    args = json.loads(first)["interrupts"][0]["arguments"]
    assert args["env"] == "prod" and set(args["settings"]) == {*SECRETS, "shaped"}
    assert all(args["settings"][name] == "[redacted]" for name in SECRETS)
    assert set(args["settings"]["shaped"]) == set(SHAPED)
    assert args["settings"]["shaped"]["target"] == "postgresql://***@db.internal/app"
    assert args["settings"]["shaped"]["note"] == "charge with [redacted] today"


@pytest.mark.parametrize(
    ("notify_args", "shown"),
    [(False, {}), (["env"], {"env": "prod"}), (True, {"env": "prod", "settings": {"a": 1}})],
)
def test_notify_args_sends_all_none_or_the_named_arguments(
    receiver: Receiver, notify_args: Any, shown: dict[str, Any]
) -> None:
    store = MemoryStore(outbox=True)
    session = paused_on({"env": "prod", "settings": {"a": 1}}, "na-1", notify_args)
    store.save(session)
    assert Notifier(store, [Webhook(receiver.url + "/hook", secret=SECRET)]).deliver_pending() == 1
    (body,) = receiver.bodies
    assert body["interrupts"][0]["arguments"] == shown
    # it travels with the task; at its default it is not in the snapshot at all
    (task,) = json.loads(session.to_json())["hitl"]["tasks"]
    assert ("notify_args" in task) is (notify_args is not True)


def test_notify_args_is_checked_when_given() -> None:
    from intermission.errors import UsageError

    for bad in ("env", [1], [""], 3):
        with pytest.raises(UsageError, match="notify_args"):
            HITLInterceptor().on_tool("t", notify_args=bad)


def test_names_that_say_secret_in_any_spelling() -> None:
    for name in ("pwd", "DB_PASSWORD", "apiKey", "x-access-key", "sshKeyPath", "JWT", "dsn",
                 "client_secret", "ClientKey", "DATABASE_URL", "session", "Authorization",
                 "bearer_token", "otp", "user_pin", "x-auth", "auth_header"):  # fmt: skip
        assert secret_name(name), name
    for name in ("env", "user_id", "amount", "footprint", "spinner", "region", "author",
                 "authority", "session_id"):
        assert not secret_name(name), name
    assert userinfo_masked("see redis://:pw@cache:6379/0 and https://a@b.c/") == (
        "see redis://***@cache:6379/0 and https://***@b.c/"
    )


def test_a_secret_assigned_inside_text_is_redacted_and_the_rest_stays() -> None:
    from intermission.notify.redact import redact_text

    cases = {
        "PGPASSWORD=hunter2 psql -h db": "PGPASSWORD=[redacted] psql -h db",
        "https://x/cb?token=abc123&user=1": "https://x/cb?token=[redacted]&user=1",
        '{"api_key": "k-123", "user": "bob"}': '{"api_key": [redacted], "user": "bob"}',
        "see https://example.com/a:b at 10:30": "see https://example.com/a:b at 10:30",
        "Reason: rotate the key": "Reason: rotate the key",
    }
    for text, shown in cases.items():
        assert redact_text(text) == shown


# -- the property ----------------------------------------------------------------------------
_ALNUM = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=20,
                 max_size=40)  # fmt: skip
_SHAPES = st.one_of(
    _ALNUM.map(lambda s: "sk_live_" + s), _ALNUM.map(lambda s: "sk_test_" + s),
    _ALNUM.map(lambda s: "sk-" + s), _ALNUM.map(lambda s: "ghp_" + s),
    _ALNUM.map(lambda s: "github_pat_" + s), _ALNUM.map(lambda s: "xoxb-" + s),
    _ALNUM.map(lambda s: "glpat-" + s),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: "AKIA" + s),
    st.tuples(_ALNUM, _ALNUM, _ALNUM).map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"),
    _ALNUM.map(lambda s: f"-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----"),
    _ALNUM.map(lambda s: f"postgresql://app:{s}@db/x"),
)  # fmt: skip
_AROUND = st.text(" :=,;\n\"'(", max_size=12)  # (a token glued to letters is another word)
_INNOCENT = st.text("abcdefghij_", min_size=1, max_size=8).filter(lambda k: not secret_name(k))


def _core(secret: str) -> str:
    """The part of a shaped secret that must never be shown."""
    if secret.startswith("postgresql://"):
        return secret.split(":")[2].split("@")[0]
    if secret.startswith("-----BEGIN"):
        return secret.split("\n")[1]
    return secret


@st.composite
def _nested(draw: Any) -> tuple[dict[str, Any], str]:
    secret = draw(_SHAPES)
    value: Any = draw(_AROUND) + secret + draw(_AROUND)
    for _ in range(draw(st.integers(0, 6))):  # any depth (a summary shows 3 levels)
        if draw(st.booleans()):
            value = {draw(_INNOCENT): value}
        else:
            value = [value]
    others = draw(st.dictionaries(_INNOCENT, st.integers(), max_size=3))
    return {draw(_INNOCENT): value, **others}, _core(secret)


@settings(max_examples=200, deadline=None)
@given(_nested())
@example(({"note": "sk_live_" + "a" * 24}, "sk_live_" + "a" * 24))
@example(({"a": [{"b": "x postgresql://u:p4ssw0rd-long-enough@h/d"}]}, "p4ssw0rd-long-enough"))
def test_no_secret_shaped_value_survives_a_summary_at_any_depth(case: Any) -> None:
    args, core = case
    assert core not in json.dumps(summarize(args), ensure_ascii=False)
    assert core not in json.dumps(redact(args), ensure_ascii=False)
