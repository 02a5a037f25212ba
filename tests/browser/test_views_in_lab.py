"""Views that tell the truth, in a real JupyterLab 4 (issue 21, R51): every view renders from
the session or its store, so a decision made elsewhere — the CLI, another kernel, another
widget, a re-run cell — shows within seconds and the cells below read it, whoever made it.

Screenshots go to tests/artifacts/ (not committed)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from tests.browser.conftest import shot
from tests.browser.lab import Lab, Notebook, goes_on, html_shows

from intermission.principals import os_principal

SECOND_VIEW = [
    "from intermission.examples import build_change_graph\n"
    "from intermission.notebook import Inbox\n"
    "from intermission.stores import SQLiteStore\n"
    "\n"
    "colleague = Inbox(SQLiteStore('tutorial-05.sqlite'), {'change': build_change_graph()})\n"
    "colleague",
]


def notebook_file(lab: Lab, name: str, cells: list[str]) -> str:
    """A scratch notebook in the Lab's folder (another person's page, say)."""
    code = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = {
        "cells": [{**code, "source": c} for c in cells],
        "metadata": {"kernelspec": kernel},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (lab.nb_dir / name).write_text(json.dumps(nb))
    return name


def test_a_cli_decision_shows_in_the_open_widget_and_a_second_inbox_and_the_cells_below(
    lab: Lab, page: Any
) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "05_persistence.ipynb")
    nb.run_all()
    inbox = nb.panel.locator(".inbox")
    inbox.locator("button.inbox-open").click()
    widget = inbox.locator(".approval-widget")
    widget.wait_for(state="visible", timeout=60_000)
    expect(widget.locator("button.approval-approve")).to_be_enabled()

    # a colleague's page: another kernel with its own Inbox on the same store
    other_page = page.context.new_page()
    other = Notebook(other_page, lab, notebook_file(lab, "colleague.ipynb", SECOND_VIEW))
    other.run_all()
    colleague = other.panel.locator(".inbox")
    expect(colleague.locator(".inbox-table")).to_contain_text("Change plan awaits human review")
    colleague.locator("button.inbox-open").click()
    colleague_widget = colleague.locator(".approval-widget")
    expect(colleague_widget.locator("button.approval-approve")).to_be_enabled(timeout=60_000)

    # carol decides in a terminal
    done = subprocess.run(
        [sys.executable, "-m", "intermission", "approve", "change-001", "--reviewer", "carol",
         "--comment", "from the terminal", "--store", "tutorial-05.sqlite"],
        cwd=lab.nb_dir, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Change executed: applied change-001" in done.stdout

    # both pages show who decided what and when, within seconds, with nothing left to click
    for view, box in ((widget, inbox), (colleague_widget, colleague)):
        status = view.locator(".approval-status")
        # the OS user decided; carol is the display name typed on the command line
        expect(status).to_contain_text(f"APPROVE by carol ({os_principal().name}) at ",
                                       timeout=30_000)  # fmt: skip
        expect(status).to_contain_text("from the terminal")
        expect(view.locator(".approval-result")).to_contain_text(
            "Change executed: applied change-001"
        )
        expect(view.locator("button.approval-approve")).to_be_disabled()
        expect(view).not_to_contain_text("NothingToResumeError")
        expect(box.locator(".inbox-table")).to_contain_text("no pending sessions", timeout=30_000)
        html_shows(view.locator(".approval-graph"), "executor_agent · visited")
    shot(colleague, "views-cli-decided-colleague")
    other_page.close()
    shot(inbox, "views-cli-decided")

    # the cells below read the session's decision, whoever made it
    goes_on(nb, "inbox.code_twin(", "Change executed: applied change-001")


def test_a_widget_shown_again_after_the_decision_says_who_decided_and_the_cells_below_go_on(
    lab: Lab, page: Any
) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "04_graph_approval.ipynb")
    nb.run_all()
    widget = nb.widget(".approval-widget")
    widget.locator("button.approval-approve").click()
    expect(widget.locator(".approval-result")).to_contain_text(
        "Change executed: applied change-001", timeout=60_000
    )
    # the person runs the widget's cell again, then the rest of the page
    nb.run_from("widget = ApprovalWidget(")
    widget = nb.widget(".approval-widget")
    expect(widget.locator(".approval-status")).to_contain_text("APPROVE by alice at ")
    expect(widget.locator("button.approval-approve")).to_be_disabled()
    assert "Waiting for your decision" not in (widget.text_content() or "")
    assert nb.problems() == []
    assert "Change executed: applied change-001" in nb.output_of("widget.code_twin(")
    assert nb.output_of("what this page taught").strip() == "ok"


def test_a_second_widget_on_one_session_follows_the_first(lab: Lab, page: Any) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "04_graph_approval.ipynb")
    nb.run_all()
    first = nb.widget(".approval-widget")
    # a second view of the same in-memory session, in a new cell at the end
    nb.panel.locator(".jp-Cell").last.locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("b")
    nb.page.keyboard.press("Enter")
    nb.page.keyboard.type("second = ApprovalWidget(team, session)\nsecond")
    nb.page.keyboard.press("Shift+Enter")
    nb.wait_idle()
    views = nb.panel.locator(".approval-widget")
    expect(views).to_have_count(2, timeout=60_000)
    second = views.nth(1)
    expect(second.locator("button.approval-approve")).to_be_enabled()
    first.locator("button.approval-approve").click()
    expect(first.locator(".approval-result")).to_contain_text("Change executed", timeout=60_000)
    expect(second.locator(".approval-status")).to_contain_text("APPROVE by alice at ",
                                                               timeout=30_000)  # fmt: skip
    expect(second.locator("button.approval-approve")).to_be_disabled()
    html_shows(second.locator(".approval-graph"), "executor_agent · visited", "end · done")
    expect(second).to_contain_text("executor_agent")  # its timeline moved on too


def test_01_reject_in_the_panel_and_the_cells_below_handle_it(lab: Lab, page: Any) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "01_quickstart.ipynb")
    nb.run_all()
    panel = nb.widget(".hitl-panel")
    panel.locator(".hitl-reason input").fill("wrong user")
    panel.locator("button.hitl-reject").first.click()
    expect(panel.locator(".approval-status")).to_contain_text("done", timeout=60_000)
    expect(panel.locator(".approval-status")).to_contain_text("REJECT by alice")
    goes_on(nb, "panel.code_twin(")


def test_08_a_fork_from_checkpoint_1_resumed_to_its_pause_is_decided_in_the_widget(
    lab: Lab, page: Any
) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "08_what_if.ipynb")
    nb.run_all()
    history = nb.widget(".im-history")
    label = history.locator(".history-label")
    expect(label).to_contain_text("checkpoint 3")
    handle = history.locator(".history-slider input[type=range]")
    handle.focus()
    handle.press("ArrowLeft")
    expect(label).to_contain_text("checkpoint 2", timeout=30_000)
    handle.press("ArrowLeft")
    expect(label).to_contain_text("checkpoint 1", timeout=30_000)
    expect(label).to_contain_text("proposal_agent")
    history.locator("button.history-fork").click()
    opened = history.locator(".history-opened")
    opened.locator("button.history-resume").click()  # the fork runs on to its pause …
    fork = opened.locator(".approval-widget")  # … and becomes the widget that decides it
    expect(fork).to_contain_text("Change plan awaits human review", timeout=60_000)
    expect(fork.locator("button.approval-approve")).to_be_enabled()
    fork.locator(".approval-comment textarea").fill("decided in the fork")
    fork.locator("button.approval-approve").click()
    expect(fork.locator(".approval-result")).to_contain_text(
        "Change executed: applied change-001", timeout=60_000
    )
    expect(fork.locator(".approval-status")).to_contain_text("APPROVE by alice at ")
    shot(history, "08-fork-from-1-decided")
    goes_on(
        nb, "fork_widget = history.code_twin(",
        "change-001.fork1 → Change executed: applied change-001",
    )  # fmt: skip


def test_06_clicking_the_stepper_then_running_the_next_cell_works(lab: Lab, page: Any) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "06_parallel_and_interrupt.ipynb")
    nb.run_all()
    stepper = nb.widget(".im-stepper")
    status = stepper.locator(".stepper-status")
    expect(status).to_contain_text("Finished")  # Run All stepped it to its end in code
    stepper.locator("button:text-is('Reset')").click()
    expect(status).to_contain_text("Reset: back at the start")
    stepper.locator("button:text-is('Step')").click()
    expect(status).to_contain_text("Stopped after the steps asked for")
    expect(status).to_contain_text("next node(s): fork")
    stepper.locator("button:text-is('Run')").click()  # as the prose invites
    expect(status).to_contain_text("Finished: every branch reached its end")
    expect(status).to_contain_text("nothing left to run")
    shot(stepper, "06-stepper-clicked")
    nb.run_from("stepper.reset()")
    assert nb.problems() == []
    assert "done ['build', 'package', 'test', 'join', 'deploy']" in nb.output_of("stepper.reset()")
    assert nb.output_of("assert fresh.context.get").strip() == "ok"


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
def test_04_every_text_a_person_reads_before_deciding_has_aa_contrast_in_both_themes(
    lab: Lab, page: Any, theme: str
) -> None:
    lab.set_theme(theme)
    try:
        nb = Notebook(page, lab, "04_graph_approval.ipynb")
        nb.run_all()
        light = page.evaluate("() => document.body.dataset.jpThemeLight")
        assert light == ("true" if theme.endswith("Light") else "false")
        widget = nb.widget(".approval-widget")
        html_shows(widget, "Waiting for your decision", "Request", "im-req-row")
        parts = {
            "request": ".approval-widget .approval-request .im-ask",
            "hint": ".approval-widget .im-hint",
            "JSON": ".approval-widget .im-pre",
            "timeline headers": ".approval-widget .im-req-row",
        }
        seen = nb.contrast(*parts.values())
        for name, selector in parts.items():
            assert any(s["sel"] == selector for s in seen), f"no {name} text on the page"
        low = [s for s in seen if s["ratio"] < 4.5]
        assert low == [], low
        card = widget.locator(".approval-graph .im-graph-card")
        assert card.count() == 1  # the graph sits on its themed card
        tag = "dark" if theme.endswith("Dark") else "light"
        shot(widget, f"04-decision-moment-{tag}")
    finally:
        lab.set_theme("JupyterLab Light")


def _fits_and_reads(graphs: list[dict[str, Any]], what: str) -> None:
    assert graphs, f"no graph in {what}"
    for g in graphs:
        assert g["width"] <= g["room"] + 1, f"{what}: {g}"
        assert g["minText"] >= 10, f"{what}: text too small: {g}"


def test_graphs_fit_their_output_and_their_text_stays_readable(lab: Lab, page: Any) -> None:
    nb = Notebook(page, lab, "04_graph_approval.ipynb")
    nb.run_all()
    nb.widget(".approval-widget")
    standalone = nb.cell("from intermission.notebook import GraphView")
    _fits_and_reads(nb.graphs(standalone.locator(".jp-OutputArea-output")), "a GraphView")
    _fits_and_reads(nb.graphs(nb.panel.locator(".approval-graph")), "the approval widget")
    lab.shut_down_kernels()

    nb = Notebook(page, lab, "08_what_if.ipynb")
    nb.run_all()
    nb.widget(".im-history")
    _fits_and_reads(nb.graphs(nb.panel.locator(".im-compare")), "Compare")
    _fits_and_reads(nb.graphs(nb.panel.locator(".history-graph")), "History")
    shot(nb.panel.locator(".im-compare").first, "08-compare")


def test_an_empty_reviewer_field_records_the_default_reviewer_never_none(
    lab: Lab, page: Any
) -> None:
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "04_graph_approval.ipynb")
    nb.run_all()
    widget = nb.widget(".approval-widget")
    reviewer = widget.locator(".approval-reviewer input")
    reviewer.fill("")  # a person clears the field
    widget.locator("button.approval-approve").click()
    expect(widget.locator(".approval-result")).to_contain_text("Change executed", timeout=60_000)
    expect(widget.locator(".approval-status")).to_contain_text("APPROVE by alice at ")
    expect(reviewer).to_have_value("alice")  # the field says who the decision records
    expect(widget).to_contain_text("APPROVE by alice")  # the timeline row
    expect(widget).not_to_contain_text("no reviewer named")
    goes_on(nb, "widget.code_twin(", "Change executed: applied change-001")


def test_04_in_jupyter_notebook_7_runs_renders_the_widget_and_a_click_decides(
    lab: Lab, page: Any
) -> None:
    from playwright.sync_api import expect
    from tests.browser.lab import TOKEN

    page.goto(f"{lab.base}/notebooks/04_graph_approval.ipynb?token={TOKEN}", timeout=120_000)
    panel = page.locator(".jp-NotebookPanel")
    panel.wait_for(timeout=120_000)
    lab.wait_kernel_idle("04_graph_approval.ipynb")
    page.locator(".lm-MenuBar-item:has-text('Run')").first.click()
    page.locator(".lm-Menu-item", has=page.locator(
        ".lm-Menu-itemLabel:text-is('Run All Cells')")).first.click()  # fmt: skip
    widget = panel.locator(".approval-widget")
    expect(widget.locator("button.approval-approve")).to_be_enabled(timeout=120_000)
    expect(widget).to_contain_text("Change plan awaits human review")
    lab.wait_kernel_idle("04_graph_approval.ipynb")
    assert panel.locator("[data-mime-type='application/vnd.jupyter.error']").count() == 0
    assert "Error displaying widget" not in (panel.text_content() or "")
    widget.locator("button.approval-approve").click()
    expect(widget.locator(".approval-result")).to_contain_text(
        "Change executed: applied change-001", timeout=60_000
    )
    expect(widget.locator(".approval-status")).to_contain_text("APPROVE by alice at ")
    shot(widget, "nb7-04-after-approve")


RACE = [
    "from intermission import InMemoryAgentSession\n"
    "from intermission.examples import build_change_graph\n"
    "from intermission.notebook import ApprovalWidget, settings\n"
    "from intermission.stores import SQLiteStore\n"
    "\n"
    "settings.view_poll_s = None  # the widget learns of carol's decision only from the click\n"
    "store = SQLiteStore('race.sqlite')\n"
    "team = build_change_graph()\n"
    "session = InMemoryAgentSession.of('change-race')\n"
    "team.prompt('Upgrade the order service').session(session).call()\n"
    "store.save(session)\n"
    "widget = ApprovalWidget(team, store.load('change-race'), store=store, reviewer='alice')\n"
    "widget",
]


def test_a_click_that_lost_the_race_says_so_naming_the_decision_that_won(
    lab: Lab, page: Any
) -> None:  # issue 29, item 2
    from playwright.sync_api import expect

    nb = Notebook(page, lab, notebook_file(lab, "race.ipynb", RACE))
    nb.run_all()
    widget = nb.widget(".approval-widget")
    widget.locator(".approval-reason input").fill("not this week")
    reject = widget.locator("button.approval-reject")
    expect(reject).to_be_enabled()
    # carol approves in a terminal; the page still shows the decision as open
    done = subprocess.run(
        [sys.executable, "-m", "intermission", "approve", "change-race", "--reviewer", "carol",
         "--store", "race.sqlite"],
        cwd=lab.nb_dir, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reject.click()
    lost = widget.locator(".im-lost-box")
    # the OS user decided; carol is the display name typed on the command line
    carol = f"carol ({os_principal().name})"
    expect(lost).to_contain_text(
        f"Your Reject was not recorded: APPROVE by {carol} at ", timeout=30_000
    )
    expect(lost).to_contain_text("came first")
    expect(widget.locator(".approval-status")).to_contain_text(
        f"Decided (not in this view): APPROVE by {carol}"
    )
    expect(widget.locator(".approval-result")).to_contain_text("Change executed")
    expect(reject).to_be_disabled()
    shot(widget, "views-lost-race")


def test_a_widget_of_a_restarted_kernel_says_it_is_disconnected_and_a_rerun_is_live(
    lab: Lab, page: Any
) -> None:  # issue 29, item 3
    from playwright.sync_api import expect

    nb = Notebook(page, lab, "04_graph_approval.ipynb")
    nb.run_all()
    widget = nb.widget(".approval-widget")
    approve = widget.locator("button.approval-approve")
    expect(approve).to_be_enabled()
    expect(widget.locator(".im-banner")).to_be_hidden()
    nb.menu("Kernel", "Restart Kernel…")
    nb.wait_idle()
    banner = widget.locator(".im-banner")
    expect(banner).to_contain_text("Disconnected", timeout=30_000)
    expect(banner).to_contain_text("Run the cell again for a live widget")
    expect(approve).to_be_disabled()
    expect(widget.locator(".approval-reason input")).to_be_disabled()
    shot(widget, "views-disconnected")
    nb.run_all()  # a live widget in the old one's place
    widget = nb.widget(".approval-widget")
    expect(widget.locator(".im-banner")).to_be_hidden()
    widget.locator("button.approval-approve").click()
    expect(widget.locator(".approval-result")).to_contain_text(
        "Change executed: applied change-001", timeout=60_000
    )


POLICY_PANEL = [
    "from intermission import (ApprovalPolicy, HITLInterceptor, InMemoryAgentSession,\n"
    "                          Principal, ReActAgent, ScriptedModel, ToolCall, tool)\n"
    "from intermission.notebook import HITLPanel\n"
    "\n"
    "@tool\n"
    "def deploy(env: str) -> str:\n"
    "    '''Deploy.'''\n"
    "    return f'deployed {env}'\n"
    "\n"
    "policy = ApprovalPolicy(roles={'sre'}, reason_to_reject=False, asserted_ok=True)\n"
    "script = ScriptedModel([[ToolCall('deploy', {'env': 'prod'})], 'done'])\n"
    "hitl = HITLInterceptor().on_tool('deploy', policy=policy)\n"
    "agent = ReActAgent.of(script).name('deploy').tools(deploy).interceptor(hitl).build()\n"
    "session = InMemoryAgentSession.of('policy-panel')\n"
    "agent.prompt('deploy').session(session).call()\n"
    "panel = HITLPanel(agent, session, principal=Principal('alice', {'sre'}))\n"
    "panel",
]


def test_a_panel_under_a_policy_says_who_decides_and_rejects_without_a_reason(
    lab: Lab, page: Any
) -> None:  # the policy's rules on the page: roles of the name, a reason not needed
    from playwright.sync_api import expect

    nb = Notebook(page, lab, notebook_file(lab, "policy_panel.ipynb", POLICY_PANEL))
    nb.run_all()
    panel = nb.widget(".hitl-panel")
    expect(panel.locator(".im-progress")).to_have_text("waiting for an approval from sre")
    who = panel.locator(".im-who")
    expect(who).to_contain_text("Decides as alice · roles: sre")
    reviewer = panel.locator(".hitl-reviewer input")
    reviewer.fill("mallory")
    expect(who).to_contain_text("Decides as mallory · no roles (a name typed here holds none)")
    reviewer.fill("")  # cleared: the panel's principal decides, never the OS user
    reject = panel.locator(".hitl-row button.hitl-reject")
    expect(panel.locator(".hitl-reason input")).to_have_value("")
    expect(reject).to_be_enabled()  # the policy takes a rejection without a reason
    expect(panel.locator("button.hitl-reject-all")).to_be_enabled()
    reject.click()
    expect(panel.locator(".approval-status")).to_contain_text("REJECT by alice", timeout=60_000)
    expect(panel.locator(".approval-result")).to_contain_text("Rejected by the reviewer")
    expect(reviewer).to_have_value("alice")
    expect(panel.locator(".im-progress")).to_be_hidden()
    shot(panel, "views-policy-panel")


QUORUM_VIEWS = [
    "import pathlib\n"
    "from intermission import ApprovalPolicy, InMemoryAgentSession, Principal\n"
    "from intermission.examples import build_change_graph\n"
    "from intermission.notebook import ApprovalWidget\n"
    "from intermission.stores import SQLiteStore\n"
    "\n"
    "for leftover in pathlib.Path('.').glob('quorum-views.sqlite*'):\n"
    "    leftover.unlink()\n"
    "store = SQLiteStore('quorum-views.sqlite')\n"
    "policy = ApprovalPolicy(roles={'sre'}, approvals=2, not_requester=True, asserted_ok=True)\n"
    "team = build_change_graph(change_id='q-1', policy=policy)\n"
    "carol, alice, bob = (Principal(name, {'sre'}) for name in ('carol', 'alice', 'bob'))\n"
    "asked = InMemoryAgentSession.of('q-1')\n"
    "team.prompt('Upgrade the order service').session(asked).principal(carol).call()\n"
    "store.save(asked)",
    "ApprovalWidget(team, store.load('q-1'), store=store, principal=alice)",
    "ApprovalWidget(team, store.load('q-1'), store=store, principal=bob)",
    "ApprovalWidget(team, store.load('q-1'), store=store, principal=carol)",
]


def test_after_one_of_two_votes_each_view_offers_only_what_its_viewer_may_do(
    lab: Lab, page: Any
) -> None:
    """R63, as a person sees it: alice's Approve goes off after her vote, saying why, and her
    header says what is still needed; bob's view (within a poll) still offers Approve, and
    Reject once a reason is typed; carol, who asked, is offered nothing and told why."""
    from playwright.sync_api import expect

    nb = Notebook(page, lab, notebook_file(lab, "quorum-views.ipynb", QUORUM_VIEWS))
    nb.run_all()
    alice = nb.widget(".approval-widget")
    views = nb.panel.locator(".approval-widget")
    bob, carol = views.nth(1), views.nth(2)
    asked = "you asked for this approval, so someone else must decide it"
    reason = "a rejection needs a reason — write one above"
    expect(carol.locator("button.approval-approve")).to_be_disabled()
    expect(carol.locator("button.approval-reject")).to_be_disabled()
    expect(carol.locator(".im-why")).to_have_text(f"Approve and Reject are off: {asked}")
    expect(alice.locator("button.approval-approve")).to_be_enabled()
    expect(alice.locator(".im-why")).to_have_text(f"Reject is off: {reason}")

    alice.locator("button.approval-approve").click()
    mine = "you approved — waiting for one more from sre (not carol, who asked)"
    expect(alice.locator(".im-why")).to_have_text(
        f"Approve and Reject are off: {mine}", timeout=60_000
    )
    expect(alice.locator("button.approval-approve")).to_be_disabled()
    expect(alice.locator("button.approval-approve")).to_have_attribute("title", mine)
    expect(alice.locator("button.approval-reject")).to_be_disabled()
    request = alice.locator(".approval-request")
    expect(request).to_contain_text("Waiting for one more approval:")
    expect(request).not_to_contain_text("Waiting for a decision")
    expect(alice.locator(".approval-status")).to_have_text(
        "Your approval is recorded. Waiting for one more approval."
    )
    shot(alice, "r63-alice-after-her-vote")

    # bob's view re-reads the store every few seconds: the same header, his buttons his own
    expect(bob.locator(".approval-request")).to_contain_text(
        "Waiting for one more approval:", timeout=30_000
    )
    expect(bob.locator("button.approval-approve")).to_be_enabled()
    expect(bob.locator("button.approval-reject")).to_be_disabled()
    expect(bob.locator(".im-why")).to_have_text(f"Reject is off: {reason}")
    bob.locator(".approval-reason input").fill("not during the sale")
    expect(bob.locator("button.approval-reject")).to_be_enabled()
    expect(bob.locator(".im-why")).to_be_hidden()
    expect(carol.locator(".im-why")).to_have_text(f"Approve and Reject are off: {asked}")
    shot(bob, "r63-bob-after-alices-vote")
    # the Reviewer field names who decides: another name is judged as that person
    carol.locator(".approval-reviewer input").fill("dan")
    carol.locator(".approval-reviewer input").press("Tab")
    expect(carol.locator(".im-why")).to_have_text(
        "Approve and Reject are off: only someone with the role sre may decide this, and you "
        "hold no role"
    )  # fmt: skip
    assert nb.problems() == []
