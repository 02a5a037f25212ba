"""The clicked Slack message shows the final outcome whichever surface or path makes it
final (R63): a Slack vote leaves a reply handle (the ``response_url`` only in the outbox,
a URL-free mark on the session), and the save that makes the outcome final — a console
vote and its run, the deadline sweeper's expiry — writes the update, once per outcome.
Through real HTTP, with the Slack stand-in."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module
from tests.notify._receivers import wait_until

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx (extra notify)")
need_module("uvicorn", "uvicorn (extra agui)")

from intermission.stores import MemoryStore, SQLiteStore  # noqa: E402

from ._slack import SECRET, World, world_of  # noqa: E402
from ._slack import ran as ran_effects  # noqa: E402


@pytest.fixture(params=["sqlite", "memory"])
def world(request: Any, tmp_path: Path, monkeypatch: Any) -> Iterator[World]:
    store = (SQLiteStore(tmp_path / "s.db", outbox=True) if request.param == "sqlite"
             else MemoryStore(outbox=True))  # fmt: skip
    with world_of(store, tmp_path, monkeypatch) as w:
        yield w


def ran(tmp_path: Path) -> list[str]:
    return ran_effects(tmp_path / "effects")


def no_url_anywhere(w: World, thread: str, caplog: Any) -> None:
    """The response_url (and the secret) never in logs, the audit trail, the session's
    snapshot or a notification's body: only in the outbox row of the reply handle."""
    from intermission.core.snapshot import state_json

    assert "/respond/" not in caplog.text
    trail = str(w.store.audit(thread))
    assert "/respond/" not in trail and SECRET not in trail
    assert "/respond/" not in state_json(w.store.load(thread))
    for row in w.store.outbox.rows():
        assert "/respond/" not in str(row.payload.get("body")), row.key


def vote_in_slack_then(w: World, agent: str, thread: str) -> tuple[str, str]:
    """ann's Slack vote (1 of 2) on a new pause of ``thread``: its interrupt and the
    Approve button's value."""
    iid = w.pause(agent, thread)
    value = w.buttons(thread)["approve"]["value"]
    first = w.click("U-ANN", "approve", value)
    assert "1 of 2" in first.json()["text"], first.text
    assert w.store.load(thread).status == "pending"
    # (its ephemeral answer reaches the same response_url, posted in a thread)
    wait_until(lambda: bool(w.slack.ephemeral("/respond/1")), 30, "the ephemeral answer")
    return iid, value


def test_a_slack_vote_completed_in_the_console_updates_the_message_once(
    world: World, tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    iid, value = vote_in_slack_then(world, "quorum", "Q")
    world.notifier.deliver_pending()
    assert world.slack.updates("/respond/1") == []  # (one vote: nothing is final yet)
    world.slack.fail["/respond/1"] = 1
    done = world.console_approve("t-ben", "quorum", "Q", iid)
    assert done[-1]["type"] == "RUN_FINISHED"
    assert world.store.load("Q").status == "done" and ran(tmp_path) == ["Q delete_user 1001"]
    world.notifier.deliver_pending()  # the first attempt fails
    assert world.slack.updates("/respond/1") == []
    (row,) = [r for r in world.store.outbox.rows() if r.payload.get("reply")]
    assert row.attempts == 1
    time.sleep(0.05)  # (the retry's backoff: 0.01 s)
    world.notifier.deliver_pending()
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/1")
    text = update["blocks"][0]["text"]["text"]
    assert "Approved by ann and ben" in text, text
    assert "delete_user(user_id=1001)" in text and "user 1001 deleted" in text
    assert all(b["type"] != "actions" for b in update["blocks"])  # buttons gone
    # later saves of the thread (a late click answered, the session saved) add nothing
    late = world.click("U-BEN", "approve", value, "/respond/2")
    assert "no longer waits" in late.json()["text"]
    with world.store.claim("Q") as s:
        s.meta.setdefault("test", {})["touched"] = True
    world.notifier.deliver_pending()
    assert len(world.slack.updates("/respond/1")) == 1
    assert world.store.outbox.rows() == []
    no_url_anywhere(world, "Q", caplog)


def test_a_slack_vote_then_the_deadline_updates_the_message_as_expired(
    world: World, tmp_path: Path, caplog: Any
) -> None:
    from intermission.stores.sweep import sweep_deadlines

    caplog.set_level(logging.DEBUG)
    vote_in_slack_then(world, "quorum_minute", "X")
    later = world.store.clock.now_ms() + 120_000  # past the minute, within the handle's 30
    assert sweep_deadlines(world.store, now_ms=later) == ["X"]
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/1")
    text = update["text"]
    assert text.startswith("Expired: delete_user(user_id=1001)"), text
    assert "approved so far by ann" in text and "did not run" in text
    assert ran(tmp_path) == []
    assert sweep_deadlines(world.store, now_ms=later + 1000) == []
    world.notifier.deliver_pending()
    assert len(world.slack.updates("/respond/1")) == 1
    no_url_anywhere(world, "X", caplog)


def test_a_handle_past_its_expiry_sends_nothing_and_says_so_without_the_url(
    world: World, tmp_path: Path, caplog: Any, monkeypatch: Any
) -> None:
    from intermission.slack import reply

    caplog.set_level(logging.INFO)
    monkeypatch.setattr(reply, "REPLY_VALID_MS", 1)
    iid, _ = vote_in_slack_then(world, "quorum", "E")
    time.sleep(0.01)  # (past the handle's millisecond: the store's clock is the wall clock)
    world.console_approve("t-ben", "quorum", "E", iid)
    assert world.store.load("E").status == "done"
    world.notifier.deliver_pending()
    assert world.slack.updates("/respond/1") == []
    assert "reply handle expired" in caplog.text
    no_url_anywhere(world, "E", caplog)


def test_a_handle_that_expires_before_the_update_is_sent_drops_it(
    world: World, tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.INFO)
    iid, _ = vote_in_slack_then(world, "quorum", "D")
    world.console_approve("t-ben", "quorum", "D", iid)
    (row,) = [r for r in world.store.outbox.rows() if r.payload.get("reply")]
    # the handle's 30 minutes pass before the update is sent
    world.store.clock = _Later(world.store.clock, 31 * 60 * 1000)
    world.notifier.deliver_pending()
    assert world.slack.updates("/respond/1") == []
    assert world.store.outbox.rows() == []  # dropped, not retried
    assert "reply handle expired" in caplog.text and row.key in caplog.text
    no_url_anywhere(world, "D", caplog)


def test_a_slack_approval_whose_run_died_is_shown_once_resumed_elsewhere(
    world: World, tmp_path: Path, caplog: Any, monkeypatch: Any
) -> None:
    """The click's decision commits, then the server dies before its run ends; the run is
    resumed later by another surface (``intermission resume``'s call): that run's save
    updates the message."""
    from intermission import AgentTable
    from intermission.stores import decide

    from .agents import AGENTS

    real = decide.runner_for

    class Dies:  # the server, dying once the decision is durable, before the call runs
        def __init__(self, runner: Any) -> None:
            self.runner = runner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.runner, name)

        def prompt(self) -> Any:
            raise RuntimeError("the server died")

    iid = world.pause("ops", "C")
    value = world.buttons("C")["approve"]["value"]
    with monkeypatch.context() as m:
        m.setattr(decide, "runner_for", lambda *a, **k: Dies(real(*a, **k)))
        world.click("U-ANN", "approve", value)  # (answered 500: the handler died with it)
    s = world.store.load("C")
    assert s.status == "pending" and s.hitl.decisions[iid].reviewer == "ann"
    assert ran(tmp_path) == []
    world.notifier.deliver_pending()
    assert world.slack.updates("/respond/1") == []  # (approved, not run: not final)
    decide.decide_and_resume(world.store, "C", lambda s: None, AgentTable(AGENTS))
    assert ran(tmp_path) == ["C delete_user 1001"]
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/1")
    assert "Approved by ann" in update["text"] and "user 1001 deleted" in update["text"]
    no_url_anywhere(world, "C", caplog)


class _Later:
    """A store clock ``by_ms`` ahead of ``clock``."""

    def __init__(self, clock: Any, by_ms: float) -> None:
        self.clock, self.by_ms = clock, by_ms

    def now_ms(self) -> float:
        return float(self.clock.now_ms()) + self.by_ms


def test_a_later_call_given_the_same_id_never_updates_an_old_message(
    world: World, tmp_path: Path
) -> None:
    """The model numbers its calls per reply (``call_0`` every request): the message
    approved from Slack shows its own call's outcome, once; the next request's
    ``call_0``, decided in the console, never rewrites it."""

    def ask(user_id: int, run: str) -> str:
        events = world.run("t-cid", "numbered", {"threadId": "N", "runId": run, "messages": [
            {"id": f"u-{run}", "role": "user", "content": f"delete {user_id}"}]})  # fmt: skip
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        return str(interrupt["id"])

    ask(1001, "r1")
    world.click("U-ANN", "approve", world.buttons("N")["approve"]["value"], "/respond/1")
    world.notifier.deliver_pending()
    (update,) = world.slack.updates("/respond/1")
    assert "user_id=1001" in update["text"], update
    iid = ask(2002, "r2")
    assert iid == "call_0"
    done = world.console_approve("t-ben", "numbered", "N", iid)
    assert done[-1]["type"] == "RUN_FINISHED"
    assert ran(tmp_path) == ["N delete_user 1001", "N delete_user 2002"]
    world.notifier.deliver_pending()
    assert len(world.slack.updates("/respond/1")) == 1  # (2002's outcome went nowhere)
    assert "replies" not in world.store.load("N").meta or not world.store.load("N").meta["replies"]
