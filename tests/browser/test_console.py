"""The reviewer console (GET /) in Debian's Chromium, driven by Playwright (issue 22): a
person signs in with a token, approves one interrupt and rejects another with a reason, the
store records who (the token's principal); a decision taken meanwhile through the CLI shows
as taken, by whom; hostile text in a tool argument is shown as text; two people approve one
call that needs two approvals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests._helpers import need_module

from .lab import ROOT

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from tests.agui._server import Server, effects  # noqa: E402

from intermission.agui.auth import hash_token  # noqa: E402
from intermission.principals import os_principal  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402

HOSTILE = "<img src=x onerror=window.pwned=1><script>window.pwned=2</script>"


def _pause(server: Server, agent: str, thread: str, text: str = "go") -> None:
    events = server.run(
        agent,
        {
            "threadId": thread,
            "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": text}],
        },
    )
    assert events[-1][1]["outcome"]["type"] == "interrupt"


def _auth_file(tmp: Path) -> Path:
    """Two reviewers with tokens of their own (kept as hashes)."""
    path = tmp / "auth.json"
    path.write_text(json.dumps({"tokens": [
        {"hash": hash_token("tok-rita"), "name": "rita", "roles": ["sre"]},
        {"hash": hash_token("tok-sam"), "name": "sam", "roles": ["sre"]},
    ]}))  # fmt: skip
    return path


def _sign_in(page: Any, url: str, token: str) -> None:
    page.goto(url + "/")
    page.get_by_test_id("token").fill(token)
    page.get_by_test_id("start").click()


def _decisions(db: Path, thread: str) -> list[Any]:
    store = SQLiteStore(db)
    try:
        session = store.load(thread)
    finally:
        store.close()
    return [e.decision for e in session.events if e.kind == "hitl_decided"]


def test_a_person_approves_one_rejects_another_and_sees_the_cli_decision(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    db, log = tmp_path / "s.db", tmp_path / "e.log"
    server = Server(str(db), log, auth=_auth_file(tmp_path))
    server.token = "tok-sam"  # (the test's own requests: sam asks, rita reviews)
    tag = uuid.uuid4().hex[:6]
    a, b, c, d, e = (f"{x}-{tag}" for x in ("approve", "reject", "cli", "hostile", "race"))
    try:
        for thread in (a, b, c, e):
            _pause(server, "ops", thread)
        _pause(server, "note", d, HOSTILE)
        page = browser.new_context().new_page()
        page.goto(server.url + "/")
        # a wrong token is refused; the right one signs rita in (no name to type)
        page.get_by_test_id("token").fill("tok-nobody")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("login-msg")).to_contain_text("refused the token")
        page.get_by_test_id("token").fill("tok-rita")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("whoami")).to_have_text("Signed in as rita (sre)")
        cards = page.get_by_test_id("interrupt")
        expect(cards).to_have_count(5)

        def card(thread: str) -> Any:
            return page.locator(f'[data-testid="interrupt"][data-thread="{thread}"]')

        def done(thread: str) -> Any:  # its card once decided: in "Recently decided"
            return page.locator(f'[data-testid="decided"][data-thread="{thread}"]')

        # hostile text is text: shown literally, never run
        expect(card(d).get_by_test_id("args")).to_contain_text(HOSTILE)
        assert page.evaluate("window.pwned") is None
        assert card(d).locator("img, script").count() == 0

        # meanwhile someone decides one through the CLI
        env = {**os.environ, "AGUI_EFFECTS": str(log), "PYTHONPATH": str(ROOT)}
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "intermission",
                "--agents",
                "tests.agui.agents:AGENTS",
                "approve",
                c,
                "--reviewer",
                "carol",
                "--store",
                str(db),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 0, cli.stderr
        # it leaves the waiting list, with its outcome: the OS user decided (carol is the
        # name typed on the command line), what ran and its result
        expect(done(c).get_by_test_id("verdict")).to_have_text(
            f"Approved by carol ({os_principal().name})"
        )
        expect(done(c).get_by_test_id("result")).to_have_text("result: user 1001 deleted")
        expect(card(c)).to_have_count(0)

        # a rejection needs a reason
        card(b).get_by_test_id("reject").click()
        expect(card(b).get_by_test_id("outcome")).to_contain_text("needs a reason")
        card(b).get_by_test_id("reason").fill("too risky")
        card(b).get_by_test_id("reject").click()
        expect(done(b).get_by_test_id("outcome")).to_contain_text("rejected by you (rita)")
        expect(done(b).get_by_test_id("verdict")).to_have_text("Rejected by rita (sre): too risky")
        expect(done(b).get_by_test_id("ran")).to_have_text("nothing ran: it was rejected")
        card(a).get_by_test_id("approve").click()
        expect(done(a).get_by_test_id("outcome")).to_contain_text("approved by you (rita)")

        # the store records who decided what: the token's principal, via the console
        (approved,) = _decisions(db, a)
        assert (approved.verdict, approved.reviewer, approved.via, approved.authenticated) == (
            "approve", "rita", "console", True
        )  # fmt: skip
        (rejected,) = _decisions(db, b)
        assert (rejected.verdict, rejected.reviewer, rejected.comment) == (
            "reject",
            "rita",
            "too risky",
        )
        (by_cli,) = _decisions(db, c)
        assert (by_cli.verdict, by_cli.display, by_cli.via) == ("approve", "carol", "cli")
        assert effects(log, a) == ["delete_user 1001"] and effects(log, b) == []
        assert effects(log, c) == ["delete_user 1001"]
        # a second reviewer whose view lags (its polls answered from a stale copy) rejects
        # what rita approves: the server refuses, and the card says who won
        stale = server.get("/interrupts")
        other = browser.new_context().new_page()
        other.route("**/interrupts", lambda route: route.fulfill(json=stale))
        other.route("**/threads/**", lambda route: route.fulfill(status=503, body="{}"))
        _sign_in(other, server.url, "tok-sam")
        late = other.locator(f'[data-testid="interrupt"][data-thread="{e}"]')
        expect(late).to_have_count(1)
        card(e).get_by_test_id("approve").click()
        expect(done(e).get_by_test_id("outcome")).to_contain_text("approved by you (rita)")
        late.get_by_test_id("reason").fill("no")
        late.get_by_test_id("reject").click()
        expect(late).to_have_attribute("data-state", "refused")
        expect(late.get_by_test_id("outcome")).to_contain_text("already approved by rita")
        assert [x.verdict for x in _decisions(db, e)] == ["approve"]
        assert effects(log, e) == ["delete_user 1001"]
        assert [x["threadId"] for x in server.get("/interrupts")["interrupts"]] == [d]
    finally:
        server.stop()


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_bidi_controls_are_shown_as_escapes_never_applied(browser: Any, tmp_path: Path) -> None:
    """A thread id, a tool argument and a reviewer name holding U+202E (RIGHT-TO-LEFT
    OVERRIDE) and its kin: the console shows each as a visible ``\\u202e`` escape, so
    ``"\\u202eecila"`` can never be drawn as "alice" on the 'taken by' line."""
    from playwright.sync_api import expect

    db, log = tmp_path / "s.db", tmp_path / "e.log"
    server = Server(str(db), log)
    tag = uuid.uuid4().hex[:6]
    arg, other = f"\u202ebidi-{tag}", f"spoof-{tag}"
    try:
        _pause(server, "note", arg, "\u202eecila " + BIDI)
        events = server.run(
            "ops",
            {
                "threadId": other,
                "runId": "r1",
                "messages": [{"id": "u", "role": "user", "content": "go"}],
            },
        )
        ids = [i["id"] for i in events[-1][1]["outcome"]["interrupts"]]
        page = browser.new_context().new_page()
        page.goto(server.url + "/")
        page.get_by_test_id("reviewer").fill("rita")
        page.get_by_test_id("start").click()
        card = page.locator(f'[data-testid="interrupt"][data-thread="{arg}"]')
        expect(card.get_by_test_id("args")).to_contain_text("\\u202eecila")
        expect(card).to_contain_text(f"thread \\u202ebidi-{tag}")
        expect(card.get_by_test_id("message")).to_contain_text("\\u2066\\u2067\\u2068\\u2069")
        # someone else decides the other under a bidi-spoofed name
        server.run("ops", {"threadId": other, "runId": "r2", "messages": [], "resume": [
            {"interruptId": i, "status": "resolved", "payload": {"approved": True},
             "metadata": {"reviewer": "\u202eecila"}} for i in ids]})  # fmt: skip
        taken = page.locator(f'[data-testid="decided"][data-thread="{other}"]')
        expect(taken.get_by_test_id("verdict")).to_contain_text("Approved by \\u202eecila")
        shown = page.evaluate("document.body.innerText")
        assert not any(c in shown for c in BIDI), [c for c in BIDI if c in shown]
        style = "(n) => getComputedStyle(n).unicodeBidi"
        assert taken.get_by_test_id("verdict").evaluate(style) == "isolate"
    finally:
        server.stop()


def test_the_console_follows_the_interrupt_pages(browser: Any, tmp_path: Path) -> None:
    """``GET /interrupts`` is paged: the console shows the interrupts of every page (here
    the first page is cut to one thread; the rest comes from the server's ``next``)."""
    from playwright.sync_api import expect

    server = Server(str(tmp_path / "s.db"), tmp_path / "e.log")
    tag = uuid.uuid4().hex[:6]
    try:
        threads = [f"page{n}-{tag}" for n in range(3)]
        for thread in threads:
            _pause(server, "ops", thread)
        first = server.get("/interrupts?limit=1")
        assert first["next"] and len(first["interrupts"]) == 1
        page = browser.new_context().new_page()
        page.route("**/interrupts", lambda route: route.fulfill(json=first))
        page.goto(server.url + "/")
        page.get_by_test_id("reviewer").fill("rita")
        page.get_by_test_id("start").click()
        expect(page.get_by_test_id("interrupt")).to_have_count(3)
        for thread in threads:
            expect(page.locator(f'[data-thread="{thread}"]')).to_have_count(1)
    finally:
        server.stop()


def test_two_people_approve_a_call_that_needs_two_approvals(browser: Any, tmp_path: Path) -> None:
    """A quorum in the console: rita's approval is a vote (the card says what is still
    needed, in every open console); her second try is refused; sam's approval completes it
    and the tool runs once."""
    from playwright.sync_api import expect

    db, log = tmp_path / "s.db", tmp_path / "e.log"
    server = Server(str(db), log, auth=_auth_file(tmp_path))
    server.token = "tok-sam"
    thread = f"quorum-{uuid.uuid4().hex[:6]}"
    try:
        _pause(server, "quorum", thread)
        rita, sam = (browser.new_context().new_page() for _ in range(2))
        _sign_in(rita, server.url, "tok-rita")
        _sign_in(sam, server.url, "tok-sam")
        mine = rita.locator(f'[data-testid="interrupt"][data-thread="{thread}"]')
        theirs = sam.locator(f'[data-testid="interrupt"][data-thread="{thread}"]')
        expect(theirs.get_by_test_id("progress")).to_have_text(
            "0 of 2 approvals — waiting for 2 approvals from anyone"
        )
        mine.get_by_test_id("approve").click()
        expect(mine).to_have_attribute("data-state", "voted")
        expect(mine.get_by_test_id("outcome")).to_contain_text(
            "approved by you (rita); 1 of 2 approvals (rita, sre) — waiting for one more"
        )
        assert effects(log, thread) == []
        # sam's console shows it within a poll, and sam completes it
        expect(theirs.get_by_test_id("progress")).to_contain_text("1 of 2 approvals (rita, sre)")
        theirs.get_by_test_id("approve").click()
        outcome = sam.locator(f'[data-testid="decided"][data-thread="{thread}"]')
        expect(outcome.get_by_test_id("outcome")).to_have_text(
            "approved by you (sam); the run went on")
        expect(theirs).to_have_count(0)
        assert effects(log, thread) == ["delete_user 1001"]
        (done,) = _decisions(db, thread)
        assert [(v.name, v.via) for v in done.votes] == [("rita", "console"), ("sam", "console")]
    finally:
        server.stop()
