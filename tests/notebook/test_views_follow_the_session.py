"""Views render from the session and its store, not their own memory (issue 21, R51):
headless checks of what the browser tests show in JupyterLab."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._helpers import paused_change

from intermission.cli import main as cli
from intermission.examples import build_change_graph
from intermission.notebook import ApprovalWidget, History, Inbox, Stepper, settings
from intermission.principals import os_principal
from intermission.stores import SQLiteStore


@pytest.fixture(autouse=True)
def _person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "autopilot", False)  # a person at the page, not nbval
    monkeypatch.setattr(settings, "reviewer", "alice")


def test_a_cli_decision_shows_in_an_open_widget_and_inbox_and_the_code_twin_returns_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.sqlite"
    team, session, _ = paused_change()
    store = SQLiteStore(db)
    store.save(session)
    inbox = Inbox(store, {"change": build_change_graph}, poll_s=None)
    widget = inbox.open_session("change-001")
    other = ApprovalWidget(team, store.load("change-001"), store=store)
    assert widget.can_decide
    code = cli(["approve", "change-001", "--reviewer", "carol", "--comment", "by phone",
                "--store", str(db)])  # fmt: skip
    assert code == 0
    for view in (widget, other):
        assert view.runner.sync()  # what the poll does every few seconds
        # the OS user decided; carol is the display name typed on the command line
        me = os_principal().name
        assert f"APPROVE</b> by <b>carol ({me})</b> at " in view.status
        assert "by phone" in view.status
        assert "Change executed: applied change-001" in view.result
        assert not view.can_decide and view.decided
        assert "executor_agent · visited" in view.graph
    assert inbox.decided
    assert inbox.code_twin(lambda ib: pytest.fail("decided again")).content == (
        "Change executed: applied change-001"
    )
    assert "no pending sessions" in inbox.table
    other.click("approve")  # a stale click: says who decided, raises nothing
    assert "im-error" not in other.status
    store.close()


def test_a_widget_made_again_after_the_decision_says_who_decided_and_its_twin_reads_it() -> None:
    team, session, log = paused_change()
    ApprovalWidget(team, session).approve(reviewer="bob", comment="ok")
    again = ApprovalWidget(team, session)
    assert again.decided and not again.can_decide
    assert "by <b>bob</b>" in again.status
    assert again.code_twin(lambda w: pytest.fail("decided twice")).content.startswith(
        "Change executed"
    )
    assert log == ["change-001"]
    assert again.hint == ""  # no "waiting for your decision" with nothing to click


def test_a_second_widget_on_one_in_memory_session_follows_the_first() -> None:
    team, session, _ = paused_change()
    first, second = ApprovalWidget(team, session), ApprovalWidget(team, session)
    first.approve(reviewer="bob")
    assert second.runner.sync()
    assert "by <b>bob</b>" in second.status
    assert "end · done" in second.graph and "Request 2" in second.timeline
    assert not second.runner.sync()  # nothing new: nothing redrawn


def test_a_fork_from_an_early_checkpoint_becomes_an_approval_widget_after_resume() -> None:
    team, session, log = paused_change(checkpoints="node")
    history = History(team, session)
    history.show(1)
    opened = history.fork_from_here("early")
    opened.click("resume")
    opened.runner.wait()
    assert isinstance(history.current, ApprovalWidget)
    assert history.current.session.pending_reason == "Change plan awaits human review"
    assert history.current.approve(reviewer="alice").content == (
        "Change executed: applied change-001"
    )
    assert history.current.decided and log == ["change-001"]


def test_stepping_a_finished_stepper_says_so_and_raises_nothing() -> None:
    from tests._helpers import linear

    stepper = Stepper(linear(2))
    assert stepper.run() == "done"
    assert stepper.step(3) == "done" and "Finished" in stepper.status
    assert "nothing left to run" in stepper.status
