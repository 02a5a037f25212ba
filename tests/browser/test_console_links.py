"""A notification's link opens the reviewer console on its interrupt (Chromium, Playwright):
``serve --notify`` sends the pause to a receiver, the link in it lists that thread only and
marks that interrupt; deciding there works; a link to an interrupt decided meanwhile says
it is no longer open."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from tests.notify._receivers import SECRET, Receiver, Served, wait_until  # noqa: E402


def test_a_notification_link_opens_the_console_on_its_interrupt(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    receiver = Receiver()
    config = tmp_path / "notify.yaml"
    config.write_text(
        textwrap.dedent(f"""
        targets:
          - {{type: webhook, url: "{receiver.url}/hook", secret_env: IM_HOOK_SECRET}}
    """)
    )
    server = Served(str(tmp_path / "s.db"), config, tmp_path / "serve.log",
                    {"IM_HOOK_SECRET": SECRET})  # fmt: skip
    try:
        for thread in ("other-1", "linked", "other-2"):
            server.pause(thread)
        wait_until(lambda: receiver.total() == 3, what="three notifications")
        (body,) = [b for b in receiver.bodies if b["session"]["id"] == "linked"]
        page = browser.new_context().new_page()
        page.goto(body["link"])
        page.get_by_test_id("reviewer").fill("rita")
        page.get_by_test_id("start").click()
        card = page.get_by_test_id("interrupt")
        expect(card).to_have_count(1)  # that thread only
        expect(card).to_have_attribute("data-thread", "linked")
        expect(card).to_have_attribute("data-interrupt", body["interrupts"][0]["id"])
        expect(card).to_have_attribute("data-focus", "true")
        expect(page.get_by_test_id("status")).to_contain_text("thread linked: 1 approval waiting")
        card.get_by_test_id("approve").click()
        done = page.get_by_test_id("decided")
        expect(done.get_by_test_id("outcome")).to_contain_text("approved by you (rita)")
        # the same link later: the approval was decided, and the link shows its outcome
        again = browser.new_context().new_page()
        again.goto(body["link"])
        again.get_by_test_id("reviewer").fill("sam")
        again.get_by_test_id("start").click()
        expect(again.get_by_test_id("status")).to_contain_text("no longer open: it was decided")
        expect(again.get_by_test_id("interrupt")).to_have_count(0)
        shown = again.locator('[data-testid="decided"][data-focus="true"]')
        expect(shown).to_have_attribute("data-interrupt", body["interrupts"][0]["id"])
        expect(shown.get_by_test_id("verdict")).to_have_text("Approved by rita")
        # dropping the fragment lists every thread again
        again.evaluate("location.hash = ''")
        expect(again.get_by_test_id("interrupt")).to_have_count(2)
    finally:
        server.stop()
        receiver.stop()
