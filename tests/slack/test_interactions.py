"""Decide from Slack (R63), through real HTTP: clicks signed as Slack signs them reach
``POST /slack/interactions`` of a served app; decisions are judged by the policy as on
every surface and recorded ``via: slack``; the clicked message is updated through the
outbox, once per outcome."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx (extra notify)")
need_module("uvicorn", "uvicorn (extra agui)")

from intermission.stores import SQLiteStore  # noqa: E402

from ._slack import SECRET, World, signed, world_of  # noqa: E402
from ._slack import ran as ran_effects  # noqa: E402
from .agents import LONG  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, monkeypatch: Any) -> Iterator[World]:
    with world_of(SQLiteStore(tmp_path / "s.db", outbox=True), tmp_path, monkeypatch) as w:
        w.effects = tmp_path / "effects"  # type: ignore[attr-defined]
        yield w


def ran(w: World) -> list[str]:
    return ran_effects(w.effects)  # type: ignore[attr-defined]


def slack_entries(w: World, thread: str) -> list[Any]:
    return [r for r in w.store.audit(thread) if r.via == "slack"]


def test_approve_from_slack_runs_the_call_records_via_slack_and_updates_the_message(
    world: World,
) -> None:
    iid = world.pause("ops", "T1")
    buttons = world.buttons("T1")
    # Approve and Open; Reject opens the console card (the policy needs a reason)
    assert set(buttons) == {"approve", "reject-open", "open"}
    assert buttons["open"]["url"] == f"{world.url}/#thread=T1&interrupt={iid}"
    assert buttons["reject-open"]["url"] == buttons["open"]["url"]
    r = world.click("U-ANN", "approve", buttons["approve"]["value"])
    assert r.status_code == 200 and r.json()["response_type"] == "ephemeral", r.text
    assert world.store.load("T1").status == "done"
    assert ran(world) == ["T1 delete_user 1001"]
    (entry,) = [e for e in slack_entries(world, "T1") if e.action == "decision.recorded"]
    assert entry.actor == "ann" and entry.authenticated
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/1")
    text = update["blocks"][0]["text"]["text"]
    assert "Approved by ann" in text and "user 1001 deleted" in text
    assert all(b["type"] != "actions" for b in update["blocks"])  # buttons gone


def test_reject_without_a_reason_needed_works_from_slack(world: World) -> None:
    world.pause("lax", "T2")
    buttons = world.buttons("T2")
    assert {"approve", "reject", "open"} <= set(buttons)
    r = world.click("U-BEN", "reject", buttons["reject"]["value"])
    assert r.status_code == 200, r.text
    s = world.store.load("T2")
    assert s.status != "pending" and ran(world) == []
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/1")
    assert "Rejected by ben" in update["text"]


def test_reject_where_a_reason_is_needed_is_refused_by_the_policy_nothing_changes(
    world: World,
) -> None:
    """A ``reject`` (the message offers only the console card; one tagged as intermission
    tags it) meets the policy; the Approve button's value sent as a reject is refused."""
    from intermission.notify.targets import button_value
    from intermission.slack.signature import binding

    iid = world.pause("ops", "T3")
    value = world.buttons("T3")["approve"]["value"]
    edited = world.click("U-ANN", "reject", value)
    assert "not made by intermission" in edited.json()["text"]
    (task,) = world.store.load("T3").hitl.tasks
    shown = binding(task.tool_name, task.args, task.created_ms)
    r = world.click("U-ANN", "reject", button_value("slack", "T3", iid, "reject", SECRET, shown),
                    "/respond/2")  # fmt: skip
    assert r.status_code == 200 and "needs a reason" in r.json()["text"]
    assert "Error" not in r.json()["text"]  # a sentence, no exception class name
    assert world.store.load("T3").status == "pending"
    assert [e.action for e in slack_entries(world, "T3")] == ["decision.refused"]


def test_quorum_across_slack_and_the_console_one_person_counts_once(world: World) -> None:
    iid = world.pause("quorum", "Q")
    value = world.buttons("Q")["approve"]["value"]
    first = world.click("U-ANN", "approve", value)
    assert "recorded" in first.json()["text"] and "1 of 2" in first.json()["text"]
    # ann again from the console: she counts once
    again = world.console_approve("t-ann", "quorum", "Q", iid)
    assert again[-1]["type"] in ("RUN_ERROR", "RUN_FINISHED")
    assert world.store.load("Q").status == "pending" and ran(world) == []
    # ann's replayed-by-hand click (a new request, same person): still one vote
    second = world.click("U-ANN", "approve", value, "/respond/2")
    assert world.store.load("Q").status == "pending", second.text
    # ben in the console completes it
    done = world.console_approve("t-ben", "quorum", "Q", iid)
    assert done[-1]["type"] == "RUN_FINISHED"
    assert world.store.load("Q").status == "done" and ran(world) == ["Q delete_user 1001"]


def test_the_requester_is_refused_in_a_sentence(world: World) -> None:
    world.pause("quorum", "R", token="t-cid")
    value = world.buttons("R")["approve"]["value"]
    r = world.click("U-CID", "approve", value)
    text = r.json()["text"]
    assert text.startswith("not done:") and "Error" not in text
    assert world.store.load("R").status == "pending"
    assert [e.action for e in slack_entries(world, "R")] == ["decision.refused"]
    assert text in world_ephemeral(world, "/respond/1")


def world_ephemeral(w: World, path: str) -> list[str]:
    from tests.notify._receivers import wait_until

    wait_until(lambda: bool(w.slack.ephemeral(path)), 30, "the ephemeral answer")
    return w.slack.ephemeral(path)


def test_an_unknown_slack_user_changes_nothing(world: World) -> None:
    world.pause("ops", "U")
    value = world.buttons("U")["approve"]["value"]
    r = world.click("U-NOBODY", "approve", value)
    assert r.status_code == 200 and "not mapped to a person" in r.json()["text"]
    assert "slack_users" in r.json()["text"]
    assert world.store.load("U").status == "pending" and ran(world) == []


def test_a_forged_signature_is_401_and_changes_nothing(world: World) -> None:
    world.pause("ops", "F")
    value = world.buttons("F")["approve"]["value"]
    body = world.body("U-ANN", "approve", value, "/respond/1")
    forged = world.post(body, signed(body, int(time.time()), secret="not-the-secret-at-all"))
    assert forged.status_code == 401
    unsigned = world.post(body, {"Content-Type": "application/x-www-form-urlencoded"})
    assert unsigned.status_code == 401
    # a body changed after signing
    headers = signed(body, int(time.time()))
    tampered = world.post(body.replace(b"U-ANN", b"U-BEN"), headers)
    assert tampered.status_code == 401
    assert world.store.load("F").status == "pending" and slack_entries(world, "F") == []


def test_an_old_timestamp_gets_an_ephemeral_answer_and_changes_nothing(world: World) -> None:
    world.pause("ops", "O")
    value = world.buttons("O")["approve"]["value"]
    r = world.click("U-ANN", "approve", value, at=int(time.time()) - 6 * 60)
    assert r.status_code == 200 and "more than 5 minutes" in r.json()["text"]
    assert world.store.load("O").status == "pending" and slack_entries(world, "O") == []


def test_a_replayed_request_decides_nothing_twice(world: World) -> None:
    # after a 1-of-2 vote
    world.pause("quorum", "RV")
    value = world.buttons("RV")["approve"]["value"]
    body = world.body("U-ANN", "approve", value, "/respond/1")
    headers = signed(body, int(time.time()))
    assert "1 of 2" in world.post(body, headers).json()["text"]
    votes = len(world.store.load("RV").hitl.tasks[0].votes)
    replay = world.post(body, headers)
    assert replay.status_code == 200 and "handled already" in replay.json()["text"]
    assert len(world.store.load("RV").hitl.tasks[0].votes) == votes
    # after the approval completed
    world.pause("ops", "RC")
    value = world.buttons("RC")["approve"]["value"]
    body = world.body("U-ANN", "approve", value, "/respond/2")
    headers = signed(body, int(time.time()))
    world.post(body, headers)
    assert world.store.load("RC").status == "done"
    trail = len(world.store.audit("RC"))
    assert "handled already" in world.post(body, headers).json()["text"]
    assert ran(world) == ["RC delete_user 1001"] and len(world.store.audit("RC")) == trail
    world.notifier.deliver_pending()
    assert len(world.slack.updates("/respond/2")) == 1


def test_a_decided_or_expired_approval_is_answered_and_unchanged(world: World) -> None:
    world.pause("ops", "D")
    value = world.buttons("D")["approve"]["value"]
    world.click("U-ANN", "approve", value)
    late = world.click("U-BEN", "approve", value, "/respond/2")
    assert "no longer waits" in late.json()["text"] and "ann" in late.json()["text"]
    assert ran(world) == ["D delete_user 1001"]
    world.pause("brief", "E")  # expires 1 ms after it is asked
    value = world.buttons("E")["approve"]["value"]
    time.sleep(0.01)  # (past the deadline: the store's clock is the wall clock)
    expired = world.click("U-ANN", "approve", value, "/respond/3")
    assert expired.json()["text"].startswith("not done:"), expired.text
    assert ran(world) == ["D delete_user 1001"]


def test_arguments_too_long_to_show_whole_are_not_approvable_from_slack(world: World) -> None:
    world.pause("long", "L")
    message = world.message("L")
    buttons = {e["action_id"] for b in message["blocks"] if b["type"] == "actions"
               for e in b["elements"]}  # fmt: skip
    assert buttons == {"open"}
    assert LONG not in str(message) and "too long" in str(message)


def test_the_message_is_updated_once_per_outcome_when_the_first_delivery_fails(
    world: World,
) -> None:
    world.pause("ops", "M")
    value = world.buttons("M")["approve"]["value"]
    world.slack.fail["/respond/9"] = 1
    world.click("U-ANN", "approve", value, "/respond/9")
    world.notifier.deliver_pending()  # the update's first attempt fails
    assert world.slack.updates("/respond/9") == []
    rows = [r for r in world.store.outbox.rows() if r.payload.get("reply")]
    assert len(rows) == 1 and rows[0].attempts == 1
    time.sleep(0.05)  # (the retry's backoff: 0.01 s)
    world.notifier.deliver_pending()
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/9")
    assert "Approved by ann" in update["text"]
    assert SECRET not in str(world.store.audit("M"))
    assert "/respond/9" not in str(world.store.audit("M"))  # the response_url: never there


def test_on_postgresql_a_slack_vote_and_a_console_vote_complete_it_updated_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from tests._helpers import fresh_pg

    monkeypatch.setenv("AGUI_EFFECTS", str(tmp_path / "effects"))
    w = World(fresh_pg(outbox=True), tmp_path)
    w.effects = tmp_path / "effects"  # type: ignore[attr-defined]
    try:
        iid = w.pause("quorum", "PG")
        value = w.buttons("PG")["approve"]["value"]
        assert "1 of 2" in w.click("U-ANN", "approve", value).json()["text"]
        w.console_approve("t-ben", "quorum", "PG", iid)
        assert w.store.load("PG").status == "done" and ran(w) == ["PG delete_user 1001"]
        replay = w.click("U-ANN", "approve", value, "/respond/2")
        assert "no longer waits" in replay.json()["text"] and ran(w) == ["PG delete_user 1001"]
        w.notifier.deliver_pending()
        # completed in the console: ann's clicked message shows the outcome all the same
        (update,) = w.slack.updates("/respond/1")
        assert "Approved by ann and ben" in update["text"], update["text"]
        assert "/respond/" not in str(w.store.audit("PG"))
        w.notifier.deliver_pending()
        assert len(w.slack.updates("/respond/1")) == 1
    finally:
        w.stop()


def test_a_slow_decision_is_answered_at_once_and_goes_on(world: World, monkeypatch: Any) -> None:
    """Slack wants an answer within 3 s: past ``answer_within_s`` the click is answered and
    the decision goes on in the background (its outcome reaches the message)."""
    from tests.notify._receivers import wait_until

    from intermission.slack import interactions

    monkeypatch.setattr(interactions, "answer_within_s", 0.0)
    world.pause("ops", "B")
    value = world.buttons("B")["approve"]["value"]
    r = world.click("U-ANN", "approve", value)
    assert "being recorded" in r.json()["text"]
    wait_until(lambda: world.store.load("B").status == "done", 30, "the decision")
    wait_until(lambda: world.notifier.deliver_pending() >= 0
               and bool(world.slack.updates("/respond/1")), 30, "the update")  # fmt: skip
    (update,) = world.slack.updates("/respond/1")
    assert "user 1001 deleted" in update["text"]


def test_an_old_messages_button_never_decides_a_later_call_given_the_same_id(
    world: World,
) -> None:
    """A model that numbers its calls per reply gives every request's call the id
    ``call_0``: the Approve of a message about one request's call decides nothing of a
    later request's call with other arguments (the button's tag is bound to the arguments
    the message showed, checked again under the claim)."""

    def ask(user_id: int, run: str) -> None:
        world.run("t-cid", "numbered", {"threadId": "N", "runId": run, "messages": [
            {"id": f"u-{run}", "role": "user", "content": f"delete {user_id}"}]})  # fmt: skip

    ask(1001, "r1")
    old = world.buttons("N")["approve"]["value"]
    r = world.click("U-ANN", "approve", old, "/respond/1")
    assert ran(world) == ["N delete_user 1001"], r.text
    ask(2002, "r2")  # the thread's next request: its call is call_0 again
    (task,) = world.store.load("N").hitl.tasks
    assert task.call_uuid == "call_0" and task.args == {"user_id": 2002}
    r = world.click("U-ANN", "approve", old, "/respond/2")  # the first message, again
    assert r.status_code == 200 and "not the one the message showed" in r.json()["text"], r.text
    assert ran(world) == ["N delete_user 1001"] and world.store.load("N").status == "pending"
    forged = edited(old, m="0" * 32)  # (and a value no message carried, as before)
    assert "not made by intermission" in world.click("U-ANN", "approve", forged).json()["text"]
    new = world.buttons("N")["approve"]["value"]  # the second request's message
    assert new != old
    r = world.click("U-ANN", "approve", new, "/respond/3")
    assert ran(world) == ["N delete_user 1001", "N delete_user 2002"], r.text


@pytest.mark.parametrize(("first", "then"), [("look 7", "delete 7"), ("delete 5", "delete 5")],
                         ids=["another tool, the same arguments", "the same call asked again"])
def test_an_old_button_never_decides_a_later_call_it_did_not_show(
    world: World, first: str, then: str
) -> None:
    """The first call was decided in the console (so its Slack message kept its buttons);
    the thread's next request is ``call_0`` again — another tool with the same arguments,
    or the very same call asked again: the old message's Approve decides neither (the tag
    binds the tool, the arguments and when the call was asked)."""

    def ask(text: str, run: str) -> None:
        world.run("t-cid", "numbered", {"threadId": "B", "runId": run, "messages": [
            {"id": f"u-{run}", "role": "user", "content": text}]})  # fmt: skip

    ask(first, "r1")
    old = world.buttons("B")["approve"]["value"]
    world.console_approve("t-ben", "numbered", "B", "call_0")
    done = list(ran(world))
    ask(then, "r2")
    r = world.click("U-ANN", "approve", old, "/respond/1")
    assert "not the one the message showed" in r.json()["text"], r.text
    assert ran(world) == done and world.store.load("B").status == "pending"
    r = world.click("U-ANN", "approve", world.buttons("B")["approve"]["value"], "/respond/2")
    verb, n = then.split()
    assert ran(world) == [*done, f"B {'lookup' if verb == 'look' else 'delete'}_user {n}"], r.text


def edited(value: str, **changes: str) -> str:
    import json

    return json.dumps({**json.loads(value), **changes}, separators=(",", ":"))


def test_one_slack_app_with_a_webhook_per_channel_takes_the_clicks_of_each(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """One Slack app has one signing secret and often several targets (a webhook per
    channel): a click signed with it is taken for whichever of them sent the button."""
    from intermission.slack.signature import verify

    body = b"payload=%7B%7D"
    now = int(time.time())
    headers = signed(body, now)
    both = verify({"a": SECRET, "b": SECRET, "c": "another app's secret"},
                  headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"], body, now)
    assert both == {"a", "b"}
    store = SQLiteStore(tmp_path / "s.db", outbox=True)
    with world_of(store, tmp_path, monkeypatch, more_targets=("ops-channel",)) as w:
        w.pause("ops", "M")
        r = w.click("U-ANN", "approve", w.buttons("M")["approve"]["value"])
        assert r.status_code == 200, r.text
        assert ran_effects(tmp_path / "effects") == ["M delete_user 1001"], r.text


def test_a_button_of_an_earlier_release_decides_nothing_and_says_open_the_approval(
    world: World,
) -> None:
    """A message sent before buttons named their call (a pause that outlives the deploy):
    its tag is recognised, decides nothing (it could decide a later call given the same
    id) and the click is told to open the approval instead."""
    import hashlib
    import hmac
    import json

    world.pause("ops", "V")
    value = json.loads(world.buttons("V")["approve"]["value"])
    key = hmac.new(SECRET.encode(), b"intermission/slack-button/v1", hashlib.sha256).digest()
    what = json.dumps(["slack", "V", value["i"], "approve"], separators=(",", ":"))
    value["m"] = hmac.new(key, what.encode(), hashlib.sha256).hexdigest()[:32]
    trail = len(world.store.audit("V"))
    r = world.click("U-ANN", "approve", json.dumps(value, separators=(",", ":")))
    assert "earlier release" in r.json()["text"] and "Open" in r.json()["text"], r.text
    assert ran(world) == [] and world.store.load("V").status == "pending"
    assert len(world.store.audit("V")) == trail
