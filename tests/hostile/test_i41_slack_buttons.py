"""Decide from Slack, attacked (issue 41): Slack signs every click on every message of the
app, including a message posted by whoever holds its incoming-webhook URL, so a signed
request's button ``value`` and ``response_url`` are not intermission's word.

- A value edited to an interrupt the message never offered an Approve for (arguments too
  long to show whole), to another thread, or to another action, decides nothing: the
  value carries a tag only intermission can make (keyed from the signing secret).
- A ``response_url`` that is not Slack's (nor the target's own host) is never posted to —
  not an ephemeral answer, not the outcome through the outbox — and the click decides
  nothing: the server makes no request to a place a request body chose."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx (extra notify)")
need_module("uvicorn", "uvicorn (extra agui)")

from tests.slack._slack import (  # noqa: E402
    SECRET,
    StandIn,
    World,
    button,
    click_body,
    pause_served,
    serve_slack,
    signed,
    world_of,
)
from tests.slack._slack import ran as ran_effects  # noqa: E402

from intermission.errors import DeliveryError  # noqa: E402
from intermission.notify import SlackWebhook  # noqa: E402
from intermission.notify.notification import Notification  # noqa: E402
from intermission.notify.targets import button_value  # noqa: E402
from intermission.slack.signature import origin, reply_allowed  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, monkeypatch: Any) -> Iterator[World]:
    with world_of(SQLiteStore(tmp_path / "s.db", outbox=True), tmp_path, monkeypatch) as w:
        yield w


def ran(tmp_path: Path) -> list[str]:
    return ran_effects(tmp_path / "effects")


def edited(value: str, **changes: str) -> str:
    return json.dumps({**json.loads(value), **changes}, separators=(",", ":"))


def test_a_value_edited_to_what_the_message_never_offered_decides_nothing(
    world: World, tmp_path: Path
) -> None:
    long_iid = world.pause("long", "L")  # arguments too long: Open only
    world.pause("ops", "O")
    world.pause("ops", "O2")
    value = world.buttons("O")["approve"]["value"]
    trail = {t: len(world.store.audit(t)) for t in ("L", "O", "O2")}
    forged = [
        edited(value, t="L", i=long_iid),  # an interrupt Slack could not show whole
        edited(value, t="O2"),  # another thread
        edited(value, i="approval-1"),  # another interrupt of this thread
        button_value("slack", "L", long_iid, "approve", "another app's signing secret", ""),
        json.dumps({"n": "slack", "t": "L", "i": long_iid}),  # untagged (no "m")
    ]
    for n, v in enumerate(forged):
        r = world.click("U-ANN", "approve", v, f"/respond/{n}")
        assert r.status_code == 200 and "not made by intermission" in r.json()["text"], r.text
    # the Approve button's own value, sent as a reject, is refused too
    r = world.click("U-ANN", "reject", value, "/respond/9")
    assert "not made by intermission" in r.json()["text"]
    assert ran(tmp_path) == []
    assert {t: world.store.load(t).status for t in trail} == dict.fromkeys(trail, "pending")
    assert {t: len(world.store.audit(t)) for t in trail} == trail
    # the button as intermission made it still works
    r = world.click("U-ANN", "approve", value, "/respond/10")
    assert r.status_code == 200 and ran(tmp_path) == ["O delete_user 1001"], r.text
    assert world.store.load("O").status == "done"


def test_a_response_url_elsewhere_is_never_posted_to_and_decides_nothing(
    world: World, tmp_path: Path
) -> None:
    elsewhere = StandIn()  # (a service on the server's own network)
    try:
        world.pause("ops", "S")
        value = world.buttons("S")["approve"]["value"]
        for user in ("U-ANN", "U-NOBODY"):
            body = click_body(user, "approve", value, f"{elsewhere.url}/internal")
            r = world.post(body, signed(body, int(time.time())))
            assert r.status_code == 200 and "not Slack's" in r.json()["text"], r.text
        world.notifier.deliver_pending()
        assert elsewhere.at("/internal") == []
        assert ran(tmp_path) == [] and world.store.load("S").status == "pending"
    finally:
        elsewhere.stop()


def test_an_outbox_reply_to_a_url_elsewhere_is_dead_at_once_never_sent() -> None:
    elsewhere = StandIn()
    slack = StandIn()
    try:
        target = SlackWebhook(f"{slack.url}/webhook", name="slack", interactive=True,
                              signing_secret=SECRET)  # fmt: skip
        n = Notification(key="ntf_" + "0" * 32, kind="decided", session_id="S", agent=None,
                         created_ms=0.0, reason=None, deadline_ms=None, interrupts=(),
                         roles=(), detail={}, link=None,
                         reply={"target": "slack", "url": f"{elsewhere.url}/x",
                                "message": {"text": "hello"}})  # fmt: skip
        with pytest.raises(DeliveryError) as caught:
            target.send(n)
        assert caught.value.permanent and elsewhere.url not in str(caught.value)
        assert elsewhere.at("/x") == []
        target.close()
    finally:
        elsewhere.stop()
        slack.stop()


@pytest.mark.parametrize("url", [
    "https://hooks.slack.com@evil.example/actions/T/1/x",
    "https://hooks.slack.com.evil.example/actions/T/1/x",
    "https://evil.example\\@hooks.slack.com/actions/T/1/x",
    "http://hooks.slack.com/actions/T/1/x",
    "https://hooks.slack.com:8443/actions/T/1/x",
    "file:///etc/passwd",
    "https://hooks.slack.com/actions/T/1/x\n",
])
def test_only_slacks_own_origin_is_allowed(url: str) -> None:
    assert not reply_allowed(url, {"https://hooks.slack.com"})
    assert reply_allowed("https://HOOKS.slack.com:443/actions/T/1/x", {"https://hooks.slack.com"})
    assert origin("http://127.0.0.1:8080/webhook") == "http://127.0.0.1:8080"


def test_serve_posts_no_answer_to_a_response_url_elsewhere(tmp_path: Path) -> None:
    """``serve --notify --auth`` (a subprocess) allows Slack's host and its target's own."""
    import httpx

    slack, elsewhere = StandIn(), StandIn()
    server = serve_slack(tmp_path, slack, tmp_path / "effects")
    try:
        value = button(pause_served(server, slack), "approve")
        raw = click_body("U-ANN", "approve", value, f"{elsewhere.url}/internal")
        r = httpx.post(f"{server.url}/slack/interactions", content=raw, timeout=60,
                       headers=signed(raw, int(time.time())))  # fmt: skip
        assert r.status_code == 200 and "not Slack's" in r.json()["text"], r.text
        assert elsewhere.at("/internal") == [] and ran(tmp_path) == []
    finally:
        server.stop()
        slack.stop()
        elsewhere.stop()
    assert elsewhere.url not in server.log.read_text()
