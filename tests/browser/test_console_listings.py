"""Issue 27.4 and 27.5 in the reviewer console (Chromium, Playwright): a thread whose row
cannot be read is listed apart and never blanks the page; a thread stuck on an effect of
unknown outcome is shown as needing a person and resolved with a button; and while threads
are decided in part between polls, no card of an interrupt that stays open is dropped.

Before: one bad row made every poll a 503 and the page showed nothing; stuck threads were
not shown; a thread saved between two page fetches slipped past the cursor and its open
card was marked "no longer open" until a reload."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from tests.agui._server import Server  # noqa: E402
from tests.stores._threads import decide_one, paused_pairs  # noqa: E402
from tests.stores.test_listings import crashed_mid_effect, damage  # noqa: E402

from intermission import HITL  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402
from intermission.testing.conformance import paused_change  # noqa: E402

KEY = "change-001/execute"
CARDS = """() => [...document.querySelectorAll('[data-testid="interrupt"]')].map(
  c => [c.dataset.thread, c.dataset.interrupt, c.getAttribute("data-state")])"""


def test_unreadable_and_stuck_threads_are_shown_and_open_cards_stay(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    db = tmp_path / "s.db"
    store = SQLiteStore(db, synchronous="NORMAL")
    steady = [f"s{i:03d}" for i in range(250)]  # more than one page of GET /interrupts
    paused_pairs(store, steady)
    bad = steady.pop(7)
    damage(store, bad, "cut")
    store.save(paused_change("stuck-1"))
    crashed_mid_effect(store, "stuck-1")
    server = Server(str(db), tmp_path / "e.log", token="console-token")
    try:
        page = browser.new_context().new_page()
        page.goto(server.url + "/")
        page.get_by_test_id("token").fill("console-token")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("interrupt")).to_have_count(2 * len(steady) + 1, timeout=60_000)
        unreadable = page.get_by_test_id("unreadable")
        expect(unreadable).to_have_count(1)
        expect(unreadable).to_contain_text(f"thread {bad} cannot be read: its stored snapshot")
        stuck = page.locator('[data-testid="stuck"][data-thread="stuck-1"]')
        expect(stuck).to_contain_text(f"effect '{KEY}' started")

        # threads decided in part while the console polls: one interrupt of two taken, the
        # other stays open, and its card must stay too
        rng = random.Random(3)
        until = time.monotonic() + 8
        while time.monotonic() < until:
            decide_one(store, rng.choice(steady))
        time.sleep(3)  # a couple more polls
        cards = {(t, i): state for t, i, state in page.evaluate(CARDS)}
        for sid in steady:
            s = store.load(sid)
            for task in HITL.pending_tasks(s):
                if task.call_uuid not in s.hitl.decisions:
                    assert cards[(sid, task.call_uuid)] is None, (sid, cards[(sid, task.call_uuid)])

        # the person checked: the effect did not happen; it will run again on approval
        stuck.get_by_test_id("result").fill("{not json")
        stuck.get_by_test_id("resolve").click()
        expect(stuck.get_by_test_id("outcome")).to_contain_text("must be JSON")
        stuck.get_by_test_id("forget").click()
        expect(stuck.get_by_test_id("outcome")).to_contain_text("recorded as not done")
        expect(stuck).to_have_attribute("data-state", "resolved")
        assert store.load("stuck-1").ledger[KEY].status == "failed"
        record = store.load("stuck-1").context.get("effects.resolved")[-1]
        # the token's principal records it (a server with auth asks for no name at all)
        assert (record["reviewer"], record.get("display"), record["via"]) == (
            "token-holder", None, "console"
        )  # fmt: skip
        assert server.get("/interrupts")["stuck"] == []
    finally:
        server.stop()
        store.close()
