"""The reviewer console as people use it (Chromium, Playwright, R63): it asks only the
sign-in the server needs and says who is signed in, keeps it across a reload until Sign
out; two reviewers and the requester, each in a browser of their own, on a change two
people other than the requester must approve: the requester is told in a sentence why
they cannot, alice's vote shows in bob's console without a reload, bob's completes it and
both see the outcome — who decided, what ran and its result — in Recently decided; a
notification's link opens its card, after the sign-in it asks for first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests._helpers import need_module

from .lab import ROOT

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from tests.agui._server import Server, effects  # noqa: E402

from intermission.agui.auth import hash_token  # noqa: E402

AGENTS = "tests.browser.console_agents:AGENTS"
SCREENSHOT = ROOT / "tests" / "artifacts" / "console-outcome.png"
"""Where the outcome's screenshot goes (the README's docs/img/console-outcome.png is one)."""


def _auth(tmp: Path) -> Path:
    path = tmp / "auth.json"
    path.write_text(json.dumps({"tokens": [
        {"hash": hash_token("tok-alice"), "name": "alice", "roles": ["sre"]},
        {"hash": hash_token("tok-bob"), "name": "bob", "roles": ["sre"]},
        {"hash": hash_token("tok-carol"), "name": "carol", "roles": ["dev"]},
    ]}))  # fmt: skip
    return path


def _ask(server: Server, agent: str, thread: str) -> str:
    """Start a run that pauses for one approval; its interrupt id."""
    message = {"id": "u", "role": "user", "content": "go"}
    events = server.run(agent, {"threadId": thread, "runId": "r1", "messages": [message]})
    outcome = events[-1][1]["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    return str(interrupt["id"])


def _sign_in(page: Any, url: str, token: str) -> None:
    page.goto(url)
    page.get_by_test_id("token").fill(token)
    page.get_by_test_id("start").click()


def test_sign_in_asks_only_what_the_server_needs_and_is_kept_until_sign_out(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    with_auth = Server(str(tmp_path / "a.db"), tmp_path / "a.log", auth=_auth(tmp_path),
                       agents=AGENTS)  # fmt: skip
    without = Server(str(tmp_path / "b.db"), tmp_path / "b.log", agents=AGENTS)
    try:
        page = browser.new_context().new_page()
        page.goto(with_auth.url + "/")
        # a token server: a token field, no name field
        expect(page.get_by_test_id("token")).to_be_visible()
        expect(page.get_by_test_id("reviewer")).to_be_hidden()
        expect(page.get_by_test_id("login-hint")).to_contain_text("signs reviewers in with a token")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("login-msg")).to_have_text("enter your token")
        page.get_by_test_id("token").fill("tok-nobody")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("login-msg")).to_have_text("the server refused the token")
        page.get_by_test_id("token").fill("tok-alice")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("whoami")).to_have_text("Signed in as alice (sre)")
        expect(page.get_by_test_id("status")).to_contain_text("0 approvals waiting")
        assert "tok-alice" not in page.url
        # a reload keeps the sign-in
        page.reload()
        expect(page.get_by_test_id("whoami")).to_have_text("Signed in as alice (sre)")
        expect(page.get_by_test_id("login")).to_be_hidden()
        # sign out: the form again, and a reload does not sign back in
        page.get_by_test_id("signout").click()
        expect(page.get_by_test_id("login")).to_be_visible()
        expect(page.get_by_test_id("whoami")).to_be_hidden()
        page.reload()
        expect(page.get_by_test_id("token")).to_be_visible()
        # switch reviewer: sign in as bob in the same tab
        page.get_by_test_id("token").fill("tok-alice")
        page.get_by_test_id("start").click()
        page.get_by_test_id("switch").click()
        page.get_by_test_id("token").fill("tok-bob")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("whoami")).to_have_text("Signed in as bob (sre)")

        # a server without sign-in: a name field only
        open_page = browser.new_context().new_page()
        open_page.goto(without.url + "/")
        expect(open_page.get_by_test_id("reviewer")).to_be_visible()
        expect(open_page.get_by_test_id("token")).to_be_hidden()
        open_page.get_by_test_id("start").click()
        expect(open_page.get_by_test_id("login-msg")).to_contain_text("enter your name")
        open_page.get_by_test_id("reviewer").fill("rita")
        open_page.get_by_test_id("start").click()
        expect(open_page.get_by_test_id("whoami")).to_contain_text("Reviewing as rita")
        open_page.reload()
        expect(open_page.get_by_test_id("whoami")).to_contain_text("Reviewing as rita")
    finally:
        with_auth.stop()
        without.stop()


def test_two_reviewers_and_the_requester_see_the_same_live_approval_and_its_outcome(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    log = tmp_path / "e.log"
    server = Server(str(tmp_path / "s.db"), log, auth=_auth(tmp_path), agents=AGENTS)
    server.token = "tok-carol"  # carol asks for the change
    thread = f"change-{uuid.uuid4().hex[:6]}"
    try:
        iid = _ask(server, "review", thread)
        alice, bob, carol = (
            browser.new_context(viewport={"width": 900, "height": 900}).new_page()
            for _ in range(3)
        )
        for page, token in ((alice, "tok-alice"), (bob, "tok-bob"), (carol, "tok-carol")):
            _sign_in(page, server.url + "/", token)

        def card(page: Any) -> Any:
            return page.locator(f'[data-testid="interrupt"][data-interrupt="{iid}"]')

        def done(page: Any) -> Any:
            return page.locator(f'[data-testid="decided"][data-interrupt="{iid}"]')

        # the requester is told why, in a sentence, and cannot click
        expect(card(carol).get_by_test_id("why-not")).to_have_text(
            "you asked for this approval, so someone else must decide it"
        )
        expect(card(carol).get_by_test_id("approve")).to_be_disabled()
        expect(card(bob).get_by_test_id("approve")).to_be_enabled()
        expect(card(bob).get_by_test_id("progress")).to_contain_text("0 of 2 approvals")

        card(alice).get_by_test_id("approve").click()
        expect(card(alice).get_by_test_id("outcome")).to_contain_text(
            "approved by you (alice); 1 of 2 approvals (alice, sre)"
        )
        expect(card(alice).get_by_test_id("approve")).to_be_disabled()
        # bob's console shows alice's vote without a reload
        expect(card(bob).get_by_test_id("progress")).to_contain_text(
            "1 of 2 approvals (alice, sre)"
        )
        assert effects(log, thread) == []

        card(bob).get_by_test_id("approve").click()
        for page in (alice, bob, carol):
            # out of the waiting list, into Recently decided with who, what ran, its result
            # (bob's resume runs the tool and the model first: under a loaded CI machine
            # that and the next poll have taken over 5 s)
            expect(card(page)).to_have_count(0, timeout=20_000)
            expect(done(page).get_by_test_id("verdict")).to_have_text(
                "Approved by alice (sre) and bob (sre)"
            )
            expect(done(page).get_by_test_id("ran")).to_have_text(
                'ran delete_user {"user_id":1001}'
            )
            expect(done(page).get_by_test_id("result")).to_have_text("result: user 1001 deleted")
            expect(done(page).get_by_test_id("answer")).to_contain_text("the run finished")
            # no stale progress anywhere on the page
            expect(page.locator("body")).not_to_contain_text("waiting for one more")
        expect(done(bob).get_by_test_id("outcome")).to_have_text(
            "approved by you (bob); the run went on"
        )
        assert effects(log, thread) == ["delete_user 1001"]
        bob.reload()  # it stays in the list
        expect(done(bob).get_by_test_id("result")).to_have_text("result: user 1001 deleted")
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        box = bob.locator("#decided-box").bounding_box()
        height = box["y"] + box["height"] + 16
        bob.screenshot(path=str(SCREENSHOT), clip={"x": 0, "y": 0, "width": 900, "height": height})
    finally:
        server.stop()


def test_a_link_opens_its_card_after_the_sign_in_and_a_decided_one_its_outcome(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    server = Server(str(tmp_path / "s.db"), tmp_path / "e.log", auth=_auth(tmp_path),
                    agents=AGENTS)  # fmt: skip
    server.token = "tok-carol"
    tag = uuid.uuid4().hex[:6]
    try:
        iid = _ask(server, "ops", f"linked-{tag}")
        _ask(server, "ops", f"other-{tag}")
        link = f"{server.url}/#thread=linked-{tag}&interrupt={iid}"
        page = browser.new_context().new_page()
        _sign_in(page, link, "tok-alice")
        card = page.get_by_test_id("interrupt")
        expect(card).to_have_count(1)
        expect(card).to_have_attribute("data-focus", "true")
        expect(card).to_have_attribute("data-interrupt", iid)
        assert page.url == link  # the hash survived the sign-in
        card.get_by_test_id("reason").fill("not today")
        card.get_by_test_id("reject").click()
        # the same link in another reviewer's browser: the outcome
        other = browser.new_context().new_page()
        _sign_in(other, link, "tok-bob")
        shown = other.locator('[data-testid="decided"][data-focus="true"]')
        expect(shown).to_have_attribute("data-interrupt", iid)
        expect(shown.get_by_test_id("verdict")).to_have_text("Rejected by alice (sre): not today")
        expect(shown.get_by_test_id("ran")).to_have_text("nothing ran: it was rejected")
        expect(other.get_by_test_id("status")).to_contain_text("it was decided")
    finally:
        server.stop()
