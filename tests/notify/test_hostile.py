"""Hostile input to every notification entry point: a typed IntermissionError (or an
accepted value), never a bare builtin, and a refused call changes nothing."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intermission import IntermissionError
from intermission.notify import Email, Notifier, SlackWebhook, Webhook, verify
from intermission.stores import MemoryStore, SQLiteStore
from intermission.testing.conformance import paused_ops

EXAMPLES = 300 if os.environ.get("CI", "").lower() in ("1", "true", "yes") else 60
HOSTILE_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip

ODD: list[Any] = [
    None, True, 0, -1, 2**70, float("nan"), float("inf"), "", " ", "\x00", "\ud800",
    "\r\nBcc: x@y.z", "a@b.c", "https://h.example/x", "https://", "http://a b", b"bytes",
    object(), print, {1, 2}, (), ("h", 25), ("h", True), [], {}, {"r": ["a@b.c"]},
    {"r": "a@b.c"}, ["pending"], ["lunch"], "pending", ["a@b.c"], ["a@b.c\r\nX: y"],
    "x" * 10_000, RuntimeError("x"),
]  # fmt: skip
HOSTILE = st.one_of(
    st.sampled_from(ODD),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=20),
    st.lists(st.sampled_from(ODD), max_size=3),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.binary(max_size=8),
)


def _typed(call: Any) -> Any:
    try:
        return call()
    except IntermissionError:
        return None


@HOSTILE_SETTINGS
@given(HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE)
def test_target_constructors(url: Any, secret: Any, name: Any, kinds: Any, timeout: Any) -> None:
    _typed(lambda: Webhook(url, secret, name=name, kinds=kinds, roles=secret, timeout_s=timeout))
    _typed(lambda: SlackWebhook(url, name=name, kinds=kinds, roles=kinds, timeout_s=timeout))
    email = _typed(lambda: Email(url, sender=secret, to=kinds, to_roles=name, starttls=timeout))
    assert email is None or all("\n" not in a for a in email.to)
    _typed(lambda: Email(("h", 25), sender="a@b.c", to=["c@d.e"], username=name, password=url,
                         ssl_context=secret, name=name, timeout_s=timeout))  # fmt: skip


@HOSTILE_SETTINGS
@given(HOSTILE, HOSTILE, HOSTILE, HOSTILE)
def test_the_notifier_and_verify(targets: Any, public_url: Any, number: Any, body: Any) -> None:
    store = MemoryStore(outbox=True)
    hook = Webhook("https://h.example/x", secret="0123456789abcdef0123")
    _typed(lambda: Notifier(store, targets, public_url))
    _typed(lambda: Notifier(store, [hook], public_url, max_attempts=number, retry_first_s=number,
                            lease_s=number, batch=number, poll_s=number))  # fmt: skip
    _typed(lambda: Notifier(targets, [hook]))
    result = _typed(lambda: verify(public_url, body, targets))
    assert result in (None, False)  # nothing hostile verifies
    headers = {"Intermission-Timestamp": number, "Intermission-Signature": body}
    result = _typed(lambda: verify("0123456789abcdef", b"{}", headers))
    assert result in (None, False)


def test_the_outbox_methods(tmp_path: Any) -> None:
    stores = [MemoryStore(outbox=True), SQLiteStore(tmp_path / "h.db", outbox=True)]
    for store in stores:
        store.save(paused_ops("h"))

    @HOSTILE_SETTINGS
    @given(HOSTILE, HOSTILE, HOSTILE)
    def check(a: Any, b: Any, c: Any) -> None:
        for store in stores:
            box = store.outbox
            before = box.rows()
            for method, args in ((box.rows, (a, b)), (box.retry, (a,)), (box.take, (a, b, c)),
                                 (box.enable, (a,))):  # fmt: skip
                try:
                    method(*args)
                except IntermissionError:
                    pass
            after = box.rows()
            assert [r.key for r in after] == [r.key for r in before]

    check()
    for store in stores:
        store.close()
