"""The widgets in marimo (issue 32, R59), driven by Playwright and Debian's Chromium with
every host but 127.0.0.1 refused (a request to one fails the test).

In ``marimo run``: Approve on an HITLPanel (and a double click) runs the tool once — counted
from the tool's own record, a line per run in a file — and the next cell, which reads the
panel's value, shows the outcome; Reject with a reason runs nothing; an argument deleted in
the box is refused (an edit is merged over the proposed arguments), and Approve all runs
the arguments as the box shows them; the Inbox tutorial's Open → Approve decides a stored
session; the History's slider, Fork from here and the fork's Approve, and the Stepper's
buttons work; under a two-approval policy the second approver's panel shows (and approves)
the edited arguments the first one approved; Approve all after a rejected call of a batch
keeps the rejection. In ``marimo edit`` (Run pressed, as a person
would; the dark theme) a click decides too. Text keeps AA contrast in marimo's light and dark
themes.
Screenshots go to tests/artifacts/ (not committed). Under CI=true a missing Chromium or
marimo fails.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module
from tests.browser.lab import CHROMIUM, CONTRAST, ROOT
from tests.browser.lite import LOCAL_ARGS, offline_context

ARTIFACTS = ROOT / "tests" / "artifacts"
APP = Path(__file__).resolve().parent / "marimo_hitl_app.py"
VIEWS = Path(__file__).resolve().parent / "marimo_views_app.py"
QUORUM = Path(__file__).resolve().parent / "marimo_quorum_app.py"
BATCH = Path(__file__).resolve().parent / "marimo_batch_app.py"
INBOX = ROOT / "notebooks" / "marimo" / "05_inbox.py"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    need(Path(CHROMIUM).exists(), "Chromium (apt-get install chromium)")
    need_module("marimo", "marimo (pip install marimo)")
    need_module("playwright", "Playwright (pip install playwright)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LOCAL_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def tool_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("tool") / "tool.log"
    log.write_text("")
    return log


def _server(tmp: Path, mode: str, notebook: Path, log: Path, theme: str = "light") -> Any:
    from tests.browser.marimo_server import Marimo

    return Marimo(mode, notebook, tmp, theme=theme, env={"IM_TOOL_LOG": str(log)})


@pytest.fixture(scope="module")
def app_run(
    tmp_path_factory: pytest.TempPathFactory, browser: Any, tool_log: Path
) -> Iterator[Any]:
    server = _server(tmp_path_factory.mktemp("run"), "run", APP, tool_log)
    yield server
    server.stop()


@pytest.fixture
def refused() -> list[str]:
    return []


@pytest.fixture
def page(browser: Any, refused: list[str]) -> Iterator[Any]:
    context = offline_context(browser, refused)
    tab = context.new_page()
    yield tab
    context.close()
    assert refused == [], f"requests left 127.0.0.1: {refused[:10]}"


def opened(page: Any, server: Any, widget: str, *, edit: bool = False) -> Any:
    """The page of ``server`` with ``widget`` shown; in ``marimo edit`` Run is pressed first
    (cells do not run on open there), again until the cells ran (a press before the
    kernel is ready does nothing)."""
    page.goto(server.base, timeout=120_000)
    found = page.locator(widget).first
    if edit:
        give_up = time.monotonic() + 120
        while found.count() == 0:
            assert time.monotonic() < give_up, "marimo edit never ran the cells"
            page.get_by_test_id("run-button").last.click(timeout=60_000)
            try:
                found.wait_for(state="visible", timeout=5_000)
            except Exception:
                continue
    found.wait_for(state="visible", timeout=120_000)
    return found


def token(page: Any) -> str:
    """This page's run token: the tool writes it on each line it logs."""
    text = page.get_by_text(re.compile(r"RUN: [0-9a-f]{12}")).first.text_content() or ""
    match = re.search(r"RUN: ([0-9a-f]{12})", text)
    assert match, text
    return match.group(1)


def tool_runs(log: Path, run: str) -> int:
    return sum(1 for line in log.read_text().splitlines() if line.startswith(f"{run} "))


def shot(locator: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(ARTIFACTS / f"marimo-{name}.png"))


def readable(page: Any) -> None:
    """Every text of the panel has WCAG AA contrast against what is behind it."""
    seen = page.evaluate(CONTRAST, [".hitl-panel"])
    assert seen, "no text found in the panel"
    low = [s for s in seen if s["ratio"] < 4.5]
    assert low == [], low


def test_approve_in_marimo_run_runs_the_tool_once_and_the_next_cell_shows_it(
    page: Any, app_run: Any, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    panel = opened(page, app_run, ".hitl-panel")
    run = token(page)
    approve = panel.locator("button.hitl-approve")
    expect(approve).to_be_enabled(timeout=60_000)
    expect(page.get_by_text("OUTCOME: not decided yet")).to_be_visible()
    readable(page)
    shot(panel, "hitl-before")
    panel.locator(".hitl-comment input").fill("confirmed by phone")
    approve.click()
    expect(page.get_by_text("OUTCOME: done APPROVE · User 1001 has been deleted.")).to_be_visible(
        timeout=60_000
    )
    expect(panel.locator(".approval-status")).to_contain_text("APPROVE by alice")
    expect(panel).to_contain_text("approve by alice — confirmed by phone")  # the timeline
    assert tool_runs(tool_log, run) == 1
    shot(panel, "hitl-after-approve")


def test_a_double_click_in_marimo_run_runs_the_tool_once(
    page: Any, app_run: Any, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    panel = opened(page, app_run, ".hitl-panel")
    run = token(page)
    approve = panel.locator("button.hitl-approve")
    expect(approve).to_be_enabled(timeout=60_000)
    approve.dblclick()
    expect(page.get_by_text("OUTCOME: done APPROVE")).to_be_visible(timeout=60_000)
    expect(panel.locator(".approval-status")).to_contain_text("done")
    expect(panel).not_to_contain_text("error")
    assert tool_runs(tool_log, run) == 1


def test_reject_with_a_reason_in_marimo_run_runs_nothing(
    page: Any, app_run: Any, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    panel = opened(page, app_run, ".hitl-panel")
    run = token(page)
    reject = panel.locator("button.hitl-reject")
    expect(panel.locator("button.hitl-approve")).to_be_enabled(timeout=60_000)
    expect(reject).to_be_disabled()  # no reason yet
    panel.locator(".hitl-reason input").fill("wrong user")
    expect(reject).to_be_enabled()
    reject.click()
    expect(page.get_by_text("OUTCOME: done REJECT · wrong user")).to_be_visible(timeout=60_000)
    expect(panel.locator(".approval-status")).to_contain_text("REJECT by alice")
    assert tool_runs(tool_log, run) == 0
    shot(panel, "hitl-after-reject")


def test_an_argument_deleted_in_marimo_run_is_refused_and_approve_all_runs_the_box_as_shown(
    page: Any, app_run: Any, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    panel = opened(page, app_run, ".hitl-panel")
    run = token(page)
    args = panel.locator("textarea.hitl-args")
    expect(panel.locator("button.hitl-approve")).to_be_enabled(timeout=60_000)
    args.fill('{"user_id": 1001}')  # the hard delete taken out
    panel.locator("button.hitl-approve").click()
    expect(panel.locator(".approval-status")).to_contain_text(
        "an edit cannot remove an argument ('hard')", timeout=60_000
    )
    expect(page.get_by_text("OUTCOME: not decided yet")).to_be_visible()
    assert tool_runs(tool_log, run) == 0
    args.fill('{"user_id": 1001, "hard": false}')
    panel.locator("button.hitl-approve-all").click()  # approves the box as it is
    expect(page.get_by_text("OUTCOME: done APPROVE")).to_be_visible(timeout=60_000)
    assert [line for line in tool_log.read_text().splitlines() if line.startswith(f"{run} ")] == [
        f"{run} 1001 hard=False"
    ]


def test_the_inbox_tutorial_opens_a_session_and_approve_decides_it(
    page: Any, tmp_path: Path, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    server = _server(tmp_path, "run", INBOX, tool_log)
    try:
        inbox = opened(page, server, ".inbox")
        expect(inbox.locator(".inbox-table")).to_contain_text("Change plan awaits human review")
        expect(inbox.locator(".inbox-picker select")).to_have_value("ops-1")  # the newest
        expect(page.get_by_text("Nothing opened yet")).to_be_visible()
        inbox.locator(".inbox-picker select").select_option("change-001")
        inbox.locator("button.inbox-open").click()
        widget = inbox.locator(".inbox-detail .approval-widget")
        expect(widget.locator("button.approval-approve")).to_be_enabled(timeout=60_000)
        # the cell under the inbox ran again: it reads what is open now
        expect(page.get_by_text("change-001: not decided yet")).to_be_visible(timeout=60_000)
        assert widget.locator(".approval-graph svg").count() == 1
        widget.locator("button.approval-approve").click()
        expect(widget.locator(".approval-result")).to_contain_text(
            "Change executed: applied change-001", timeout=60_000
        )
        expect(inbox.locator(".inbox-table")).not_to_contain_text("change-001")
        said = page.get_by_text(re.compile(r"change-001 is done \(APPROVE by alice\)"))
        expect(said).to_be_visible(timeout=60_000)  # the cell under the inbox ran again
        shot(inbox, "inbox-after-approve")
    finally:
        server.stop()


def test_in_marimo_edit_with_the_dark_theme_a_click_decides_and_text_stays_readable(
    page: Any, tmp_path: Path, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    server = _server(tmp_path, "edit", APP, tool_log, theme="dark")
    try:
        panel = opened(page, server, ".hitl-panel", edit=True)
        run = token(page)
        assert "im-dark" in (panel.get_attribute("class") or "")
        approve = panel.locator("button.hitl-approve")
        expect(approve).to_be_enabled(timeout=60_000)
        readable(page)
        shot(panel, "hitl-dark")
        approve.click()
        expect(page.get_by_text("OUTCOME: done APPROVE")).to_be_visible(timeout=60_000)
        assert tool_runs(tool_log, run) == 1
    finally:
        server.stop()


def test_the_history_and_the_stepper_in_marimo_run(
    page: Any, tmp_path: Path, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    server = _server(tmp_path, "run", VIEWS, tool_log)
    try:
        history = opened(page, server, ".im-history")
        label = history.locator(".history-label")
        expect(label).to_contain_text("checkpoint 3")
        slider = history.locator(".history-slider input[type=range]")
        slider.focus()
        slider.press("ArrowLeft")
        expect(label).to_contain_text("checkpoint 2", timeout=30_000)
        slider.press("ArrowRight")
        expect(label).to_contain_text("checkpoint 3", timeout=30_000)
        history.locator("button.history-fork").click()  # its widget is made in the handler
        fork = history.locator(".history-opened .approval-widget")
        expect(fork.locator("button.approval-approve")).to_be_enabled(timeout=60_000)
        fork.locator("button.approval-approve").click()
        expect(fork.locator(".approval-result")).to_contain_text(
            "Change executed: applied change-001", timeout=60_000
        )
        expect(page.get_by_text("FORK: change-001.fork1 done APPROVE")).to_be_visible(
            timeout=60_000
        )  # the cell reading the History ran again
        shot(history, "history-fork-approved")
        stepper = page.locator(".im-stepper").first
        status = stepper.locator(".stepper-status")
        expect(status).to_contain_text("Ready")
        stepper.locator("button:text-is('Step')").click()
        expect(status).to_contain_text("next node(s): a", timeout=30_000)
        stepper.locator("button:text-is('Run')").click()
        expect(status).to_contain_text("Finished", timeout=30_000)
    finally:
        server.stop()


def test_under_a_quorum_the_second_approver_sees_and_approves_the_first_ones_edit(
    page: Any, tmp_path: Path, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    server = _server(tmp_path, "run", QUORUM, tool_log)
    try:
        opened(page, server, ".hitl-panel")
        run = token(page)
        alice, bob = page.locator(".hitl-panel").nth(0), page.locator(".hitl-panel").nth(1)
        expect(bob.locator("button.hitl-approve")).to_be_enabled(timeout=60_000)
        alice.locator("textarea.hitl-args").fill('{"env": "canary"}')
        alice.locator("button.hitl-approve").click()
        expect(alice.locator(".im-progress")).to_contain_text("1 of 2 approvals (alice, sre)",
                                                              timeout=60_000)  # fmt: skip
        # bob's panel re-reads the store: his box shows what alice approved, and says so
        expect(bob.locator(".im-progress")).to_contain_text("1 of 2 approvals", timeout=30_000)
        expect(bob.locator("textarea.hitl-args")).to_have_value('{\n "env": "canary"\n}')
        expect(bob.locator(".hitl-row-head")).to_contain_text("approve edited arguments")
        assert tool_runs(tool_log, run) == 0
        bob.locator("button.hitl-approve").click()
        expect(bob.locator(".approval-status")).to_contain_text("APPROVE by bob (alice and bob)",
                                                                timeout=60_000)  # fmt: skip
        assert [line for line in tool_log.read_text().splitlines() if line.startswith(run)] == [
            f"{run} canary"
        ]
        shot(bob, "quorum-second-approver")
    finally:
        server.stop()


def test_approve_all_after_rejecting_one_call_of_a_batch_keeps_the_rejection(
    page: Any, tmp_path: Path, tool_log: Path
) -> None:
    from playwright.sync_api import expect

    server = _server(tmp_path, "run", BATCH, tool_log)
    try:
        panel = opened(page, server, ".hitl-panel")
        run = token(page)
        rows = panel.locator(".hitl-row")
        expect(rows).to_have_count(2, timeout=60_000)
        panel.locator(".hitl-reason input").fill("bo is not a payee")
        rows.nth(1).locator("button.hitl-reject").click()
        expect(rows.nth(1).locator(".hitl-row-state")).to_have_text("reject (chosen)",
                                                                    timeout=30_000)  # fmt: skip
        panel.locator("button.hitl-approve-all").click()  # the rest
        expect(panel.locator(".approval-status")).to_contain_text("done", timeout=60_000)
        expect(panel.locator(".approval-status")).to_contain_text("REJECT by alice")
        assert [line for line in tool_log.read_text().splitlines() if line.startswith(run)] == [
            f"{run} ann 1"
        ]
    finally:
        server.stop()


@pytest.mark.parametrize("name", ["01_quickstart.py", "04_graph_approval.py"])
def test_a_marimo_tutorial_opens_ready_in_marimo_edit(
    page: Any, tmp_path: Path, tool_log: Path, name: str
) -> None:
    """``make marimo`` opens a tutorial already run (the repository's pyproject.toml sets
    marimo's ``auto_instantiate``): its widget shows with no Run pressed, and its first
    cell says how to run it should the cells be stale."""
    from playwright.sync_api import expect

    server = _server(tmp_path, "edit", ROOT / "notebooks" / "marimo", tool_log)
    try:
        page.goto(f"{server.base}/?file={name}", timeout=120_000)
        expect(page.get_by_text("press Run")).to_be_visible(timeout=120_000)
        widget = page.locator(".hitl-panel, .approval-widget").first
        widget.wait_for(state="visible", timeout=120_000)  # nobody pressed Run
        shot(widget, f"edit-opens-ready-{name[:2]}")
    finally:
        server.stop()
