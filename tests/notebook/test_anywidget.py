"""The widgets are anywidgets (issue 32, R59; issue 29 items 2 and 8): their modules ship in
the package and fetch nothing; what the page sends is handled in Python by the code twins'
logic and acknowledged; a decision bumps the revision the page echoes for marimo; a click
that lost the race says which decision came first; an Inbox without agents works and a
misused one fails cleanly."""

from __future__ import annotations

import base64
import gc
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, paused_change

from intermission import InMemoryAgentSession, UsageError
from intermission.examples import build_change_graph, build_ops_agent
from intermission.notebook import (
    ApprovalWidget,
    History,
    HITLPanel,
    Inbox,
    ResumeWidget,
    Stepper,
    settings,
)
from intermission.notebook import _runner as runner_module
from intermission.stores import MemoryStore

WIDGETS = [ApprovalWidget, HITLPanel, Inbox, History, Stepper, ResumeWidget]


def _ops_panel(reviewer: str = "alice") -> tuple[HITLPanel, InMemoryAgentSession]:
    session = InMemoryAgentSession.of("ops-1")
    agent = build_ops_agent()
    agent.prompt("Please delete user 1001").session(session).call()
    return HITLPanel(agent, session, reviewer=reviewer), session


def _sent(widget: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What Python sends to the widget's page (custom messages)."""
    sent: list[Any] = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append(content))
    return sent


@pytest.mark.parametrize("cls", WIDGETS, ids=lambda c: c.__name__)
def test_every_widget_is_an_anywidget_whose_module_is_in_the_package_and_fetches_nothing(
    cls: type,
) -> None:
    import anywidget
    import ipywidgets

    assert issubclass(cls, anywidget.AnyWidget) and issubclass(cls, ipywidgets.DOMWidget)
    esm = str(cls._esm)  # type: ignore[attr-defined]
    assert "export default" in esm and "function render(" in esm
    # no import of any module (a CDN, a bare specifier a host would resolve remotely), no URL
    assert not re.search(r"^\s*import\s|\bimport\(", esm, re.MULTILINE)
    assert not re.search(r"https?://|//cdn|jsdelivr|unpkg|esm\.sh", esm)
    css = str(cls._css)  # type: ignore[attr-defined]
    assert "@import" not in css and not re.search(r"url\(\s*['\"]?https?:", css)


def test_each_module_is_valid_javascript() -> None:
    node = shutil.which("node")
    need(node is not None, "Node.js (apt-get install nodejs)")
    for cls in WIDGETS:
        check = subprocess.run(
            [str(node), "--input-type=module", "--check"],
            input=str(cls._esm),  # type: ignore[attr-defined]
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, f"{cls.__name__}: {check.stderr}"


def test_a_message_from_the_page_takes_the_code_twins_path_and_is_acknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    team, session, log = paused_change()
    widget = ApprovalWidget(team, session, reviewer="alice")
    sent = _sent(widget, monkeypatch)
    widget._received(widget, {"action": "approve", "seq": "page:1", "reviewer": "bob",
                              "comment": "ship it"}, [])  # fmt: skip
    assert sent == [{"ack": "page:1"}]  # handled (its resume started): the page may go on
    widget.wait()
    assert log == ["change-001"] and session.context["approval.operator"] == "bob"
    assert session.context["approval.comment"] == "ship it" and widget.reviewer == "bob"
    widget._received(widget, {"action": "reject", "seq": "page:2", "reason": "late"}, [])
    widget._received(widget, {"action": "no such thing", "seq": "page:3"}, [])
    widget._received(widget, "not a message", [])
    assert sent[1:] == [{"ack": "page:2"}, {"ack": "page:3"}] and log == ["change-001"]
    with pytest.raises(UsageError, match="no action 'fly'"):
        widget.click("fly")


def test_a_refused_action_from_the_page_is_shown_and_acknowledged_never_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    panel, session = _ops_panel()
    before = session.to_json()
    sent = _sent(panel, monkeypatch)
    (uuid,) = panel.rows
    panel._received(panel, {"action": "decide", "seq": 7, "call_uuid": uuid,
                            "verdict": "reject", "reason": ""}, [])  # fmt: skip
    panel._received(panel, {"action": "decide", "seq": 8, "call_uuid": uuid,
                            "verdict": "explode"}, [])  # fmt: skip
    assert sent == [{"ack": 7}, {"ack": 8}]
    assert "Not recorded: a verdict is approve, reject or skip" in panel.status
    assert "Error" not in panel.status and session.to_json() == before


def test_a_decision_bumps_the_revision_and_the_outcome_says_what_it_came_to() -> None:
    panel, session = _ops_panel()
    (uuid,) = panel.rows
    start = panel.revision
    assert panel.seen == 0 and panel.outcome["pending"] and panel.outcome["answer"] is None
    assert panel.outcome["waiting_for"] == session.pending_reason
    panel.click("decide", call_uuid=uuid, verdict="approve", comment="by phone")
    panel.wait()
    assert panel.revision > start and panel.seen == 0  # only the page writes seen
    outcome = panel.outcome
    assert outcome["status"] == "done" and not outcome["pending"]
    (decision,) = outcome["decisions"]
    assert decision["verdict"] == "APPROVE" and decision["reviewer"] == "alice"
    assert decision["comment"] == "by phone" and decision["at"].endswith(" UTC")
    assert outcome["answer"] == panel.runner.response.content
    panel.set_state({"seen": panel.revision})  # the page's echo (marimo re-runs cells)
    assert panel.seen == panel.revision


def test_the_progress_line_shows_whatever_the_policy_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = "1 of 2 approvals (alice, sre) — waiting for one more from sre"
    monkeypatch.setattr(runner_module, "progress_line", lambda session: line)
    team, session, _ = paused_change()
    widget = ApprovalWidget(team, session)
    assert widget.progress == line
    panel, _s = _ops_panel()
    assert panel.progress == line
    for cls in (ApprovalWidget, HITLPanel, ResumeWidget):  # the page draws it when not empty
        assert '"progress"' in str(cls._esm)  # type: ignore[attr-defined]


def test_a_click_that_lost_to_a_decision_made_elsewhere_says_which_came_first() -> None:
    team, session, log = paused_change()
    mine, theirs = ApprovalWidget(team, session), ApprovalWidget(team, session)
    theirs.approve(reviewer="carol", comment="by phone")
    mine.click("reject", reviewer="alice", reason="not now")  # the page still showed it open
    assert re.search(r"Your Reject was not recorded: <b>APPROVE</b> by <b>carol</b> at "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC came first", mine.lost)  # fmt: skip
    assert "Decided <i>(not in this view)</i>" in mine.status and not mine.can_decide
    assert log == ["change-001"] and session.context["approval.decision"] == "APPROVE"
    mine.click("approve")  # another stale click: not recorded either
    assert "Your Approve was not recorded" in mine.lost
    # a tool call decided through a store by someone else, then this panel's click
    store = MemoryStore()
    panel, s = _ops_panel()
    store.save(s)
    panel = HITLPanel(build_ops_agent(), store.load("ops-1"), store=store, reviewer="alice")
    other = HITLPanel(build_ops_agent(), store.load("ops-1"), store=store, reviewer="carol")
    other.approve_all()
    (uuid,) = panel.rows
    panel.click("decide", call_uuid=uuid, verdict="skip")
    assert "Your Skip was not recorded: delete_user: <b>APPROVE</b> by <b>carol</b>" in panel.lost
    assert panel.lost.count("came first") == 1 and store.load("ops-1").status == "done"
    # a second message of one's own double click, after its resume ended: nothing is lost
    own, own_session = _ops_panel()
    (own_uuid,) = own.rows
    own.click("decide", call_uuid=own_uuid, verdict="approve")
    own.wait()
    own.click("decide", call_uuid=own_uuid, verdict="approve")
    assert own.lost == "" and "error" not in own.status and own_session.status == "done"
    # a new decision clears the note
    team2, s2, _ = paused_change()
    fresh = ApprovalWidget(team2, s2)
    fresh.lost = "old"
    fresh.click("approve", reviewer="alice")
    fresh.wait()
    assert fresh.lost == ""


def test_an_inbox_without_agents_lists_and_says_what_it_needs_to_open_a_session() -> None:
    store = MemoryStore()
    _team, s, _ = paused_change()
    store.save(s)
    inbox = Inbox(store, poll_s=None)
    assert inbox.pending_ids == ["change-001"] and inbox.agents == {}
    inbox.click("open", session_id="change-001")  # the page's Open: shown, not raised
    assert "made without agents" in inbox.status
    assert "Inbox(store, {&#x27;change&#x27;: agent})" in inbox.status  # (escaped HTML)
    assert inbox.current is None and inbox.detail is None
    with pytest.raises(UsageError, match="no agent named 'change'"):
        inbox.open_session("change-001")
    inbox.close()


def test_opening_a_session_in_the_inbox_says_so_in_its_value() -> None:
    # the value marimo's cells read (and the page's revision they re-run on)
    team, s, _ = paused_change()
    store = MemoryStore()
    store.save(s)
    inbox = Inbox(store, {"change": team}, poll_s=None)
    assert inbox.outcome["opened"] is None
    revision = inbox.revision
    inbox.click("open", session_id="change-001")
    opened = inbox.outcome["opened"]
    assert opened is not None and opened["session_id"] == "change-001" and opened["pending"]
    assert inbox.revision > revision
    inbox.close()


def test_a_misused_inbox_raises_a_typed_error_and_leaves_no_traceback_behind() -> None:
    unraisable: list[Any] = []
    hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        with pytest.raises(UsageError, match="session store, not str"):
            Inbox("sessions.sqlite")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="maps agent names to agents, not list"):
            Inbox(MemoryStore(), [build_change_graph])  # type: ignore[arg-type]
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []


def test_a_widget_shown_in_another_is_referenced_the_anywidget_way() -> None:
    store = MemoryStore()
    team, s, _ = paused_change()
    store.save(s)
    inbox = Inbox(store, {"change": team}, poll_s=None)
    assert inbox.get_state()["detail"] is None
    widget = inbox.open_session("change-001")
    assert inbox.detail is widget
    assert inbox.get_state()["detail"] == f"anywidget:{widget.model_id}"
    before = inbox.revision
    widget.approve(reviewer="alice")  # the opened widget's decision moves the inbox on too
    assert inbox.revision > before and inbox.outcome["opened"]["status"] == "done"
    assert inbox.outcome["pending"] == []
    inbox.close()


def test_a_widget_made_in_marimo_outside_a_running_cell_gets_its_module_as_a_data_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = types.SimpleNamespace(cell_id=None)
    fake = types.ModuleType("marimo._runtime.context")
    fake.get_context = lambda: running  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "marimo._runtime.context", fake)
    team, s, _ = paused_change()
    outside = ApprovalWidget(team, s)  # say, in an Inbox's Open handler
    prefix = "data:text/javascript;base64,"
    assert outside._esm.startswith(prefix)
    assert base64.b64decode(outside._esm[len(prefix) :]).decode() == ApprovalWidget._esm
    running.cell_id = "cell-1"  # in a cell, marimo serves the module as a file itself
    assert ApprovalWidget(team, s)._esm == ApprovalWidget._esm
    monkeypatch.delitem(sys.modules, "marimo._runtime.context")
    assert ApprovalWidget(team, s)._esm == ApprovalWidget._esm  # Jupyter: the text


def test_the_modules_are_files_in_the_package() -> None:
    from intermission.notebook import _widget

    names = {p.name for p in Path(_widget.STATIC).iterdir()}
    expected = {"_shared.js", "approval.js", "hitl_panel.js", "inbox.js", "history.js",
                "stepper.js", "resume.js", "widgets.css"}  # fmt: skip
    assert expected <= names


@pytest.fixture(autouse=True)
def _no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "autopilot", False)
    monkeypatch.setattr(settings, "view_poll_s", None)


LAZY = """
import sys
import intermission.notebook as nb
assert "ipywidgets" not in sys.modules and "anywidget" not in sys.modules  # on first use
from intermission.notebook import HITLPanel  # loads the settings module too
from intermission.notebook import settings, Settings
assert isinstance(settings, Settings), type(settings)
print(sorted(set(nb.__all__) - set(dir(nb))))
"""
BLOCKED = """
import sys
sys.modules["anywidget"] = None
try:
    import intermission.notebook
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_the_layer_loads_its_names_on_first_use_and_says_what_is_missing_at_once() -> None:
    lazy = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True)
    assert lazy.returncode == 0, lazy.stderr
    assert lazy.stdout.strip() == "[]"
    blocked = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True)
    assert blocked.stdout.strip() == (
        "MissingDependencyError 'anywidget' is not installed: pip install 'intermission[notebook]'"
    ), blocked.stderr
