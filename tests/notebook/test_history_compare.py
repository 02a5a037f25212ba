"""History and Compare (R45): scrub checkpoints, fork from one and decide the fork in the
widget that opens; compare sessions side by side. Buttons are clicked as a person would
(``click(...)``: the message the page sends), next to their code twins."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from tests._helpers import paused_change

from intermission import InMemoryAgentSession, UsageError
from intermission.examples import build_change_graph, build_ops_agent
from intermission.notebook import (
    ApprovalWidget,
    Compare,
    History,
    HITLPanel,
    ResumeWidget,
    settings,
)
from intermission.stores import MemoryStore, SQLiteStore


def images(html: str) -> list[str]:
    """The SVG of every image in ``html`` (a stored graph is a data: URL)."""
    found = re.findall(r"<img src='data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)'", html)
    return [base64.b64decode(data).decode() for data in found]


def paused(checkpoints: str = "node") -> tuple[Any, InMemoryAgentSession, list[str]]:
    return paused_change(checkpoints=checkpoints)


def test_the_slider_shows_each_checkpoint_as_it_stood() -> None:
    team, s, _ = paused()
    h = History(team, s)
    cps = h.checkpoints
    assert [c.positions for c in cps] == [["start"], ["proposal_agent"], ["approval"], ["approval"]]
    assert h.index == cps[-1].index and h.indices == [c.index for c in cps]
    assert "waiting: Change plan awaits human review" in h.label
    assert "approval · pending" in h.graph  # the newest: parked at the approval
    h.click("show", index=cps[1].index)  # what dragging the slider sends
    assert "proposal_agent" in h.label and "running" in h.label
    assert "proposal_agent · current" in h.graph
    assert "approval · not_reached" in h.graph
    then = h.at()
    assert len(then.events) == cps[1].events == 3
    assert h.timeline.count("<tr><td class='im-t'") == 3  # the timeline up to it
    assert h.show(cps[0].index) == cps[0] and "start · current" in h.graph
    with pytest.raises(UsageError):
        h.show(99)
    assert h.checkpoint == cps[0]


def test_fork_from_here_opens_the_fork_in_its_approval_widget_and_the_parent_stays() -> None:
    team, s, applied = paused()
    before = s.to_json()
    h = History(team, s)
    h.click("fork", fork_id=h.fork_id, effects="dry-run")  # a person's click
    preview = h.current
    assert isinstance(preview, ApprovalWidget) and h.clicked and h.opened is preview
    assert preview.session.session_id == "change-001.fork1"
    assert preview.session.parent == ("change-001", h.checkpoints[-1].index)
    assert h.fork_id == "change-001.fork2"  # the next free name
    assert "Fork change-001.fork1" in h.opened_title
    preview.click("approve")
    preview.wait()
    assert applied == []  # a dry run: nothing ran
    assert "not run (dry run)" not in preview.timeline  # (Compare's word)
    assert "[dry run] not run: apply_change" in preview.timeline
    h.click("fork", effects="shared")
    real = h.current
    real.click("approve", reviewer="alice")
    real.wait()
    assert applied == ["change-001"]
    again = h.fork_from_here("change-001.again")  # the code twin of the button
    assert again.approve().content == "Change executed: applied change-001"
    assert applied == ["change-001"]  # once in the family
    assert "ran in change-001.fork2" in again.timeline
    assert s.to_json() != before  # the family ledger is shared: the parent knows it ran…
    parent = json.loads(s.to_json())
    assert parent.pop("ledger") and parent == {
        k: v for k, v in json.loads(before).items() if k != "ledger"
    }  # …and nothing else of it changed
    assert [f.session_id for f in h.forks] == [
        "change-001.fork1", "change-001.fork2", "change-001.again",
    ]  # fmt: skip


def test_forks_at_a_node_open_a_resume_widget_and_a_tool_batch_an_hitl_panel() -> None:
    team, s, _ = paused()
    h = History(team, s)
    h.show(1)  # entering proposal_agent: nothing to decide there
    w = h.fork_from_here("change-001.redo")
    assert isinstance(w, ResumeWidget) and w.can_resume
    w.click("resume")
    w.runner.wait()
    assert w.session.is_pending and w.session.pending_reason == "Change plan awaits human review"
    assert s.history[-1].status == "pending"  # the parent is where it was
    ops = build_ops_agent()
    o = InMemoryAgentSession.of("ops-1")
    ops.prompt("delete user 1001").session(o).call()
    panel = History(ops, o).fork_from_here("ops-1.fork")
    assert isinstance(panel, HITLPanel) and panel.session.hitl.tasks


def test_history_of_a_stored_session_saves_its_forks(tmp_path: Any) -> None:
    team, s, applied = paused("request")
    for store in (MemoryStore(), SQLiteStore(str(tmp_path / "h.sqlite"))):
        store.save(InMemoryAgentSession.restore(s.to_json()))
        h = History(team, "change-001", store=store)
        assert [c.status for c in h.checkpoints] == ["pending"] and len(h.indices) == 1
        w = h.fork_from_here("change-001.b")
        assert store.load("change-001.b").parent == ("change-001", 0)
        w.approve()
        assert store.load("change-001.b").status == "done"
        h._received(h, {"action": "fork", "fork_id": "change-001.b"}, [])  # taken:
        assert "error" in h.status and len(h.forks) == 1  # shown, nothing is made
        store.close()
    assert applied == ["change-001", "change-001"]  # once per store's family


def test_history_refuses_what_it_cannot_show() -> None:
    team = build_change_graph(lambda c: c)
    fresh = InMemoryAgentSession.of("new")
    h = History(team, fresh)
    assert "no checkpoint yet" in h.label and not h.can_fork
    with pytest.raises(UsageError):
        h.fork_from_here("x")
    with pytest.raises(UsageError):
        History(team, "some-id")  # an id needs a store
    with pytest.raises(UsageError):
        History(team, 42)  # type: ignore[arg-type]
    _, s, _ = paused()
    with pytest.raises(UsageError):
        History(team, s).fork_from_here("x", effects="maybe")


def test_history_code_twin_leaves_the_click_to_a_person(monkeypatch: Any) -> None:
    team, s, _ = paused()
    h = History(team, s)
    monkeypatch.setattr(settings, "autopilot", False)
    assert h.code_twin(lambda h: h.fork_from_here("never")) is None
    assert "Fork from here" in h.hint and h.forks == []
    h.click("fork")
    assert h.code_twin(lambda h: h.fork_from_here("never")) is h.current
    monkeypatch.setattr(settings, "autopilot", True)
    h2 = History(team, s)
    w = h2.code_twin(lambda h: h.fork_from_here("auto"))
    assert w.session.session_id == "auto"


def test_compare_shows_paths_answers_and_effects_side_by_side() -> None:
    team, s, applied = paused()
    preview = s.fork("preview", effects="dry-run")
    ApprovalWidget(team, preview).approve()
    approve = s.fork("approve")
    ApprovalWidget(team, approve).approve()
    reject = s.fork("reject")
    ApprovalWidget(team, reject).reject("too risky")
    assert applied == ["change-001"]
    c = Compare(team, preview, approve, reject)
    rows = {what: (values, differs) for what, values, differs in c.rows()}
    assert rows["decision"] == (["APPROVE", "APPROVE", "REJECT"], True)
    assert rows["node executor_agent"] == (["visited", "visited", "not reached"], True)
    assert rows["node proposal_agent"] == (["visited"] * 3, False)
    assert rows["answer"][0] == [
        'Change executed: [dry run] not run: apply_change({"change_id":"change-001"})',
        "Change executed: applied change-001",
        "Change rejected: too risky",
    ]
    effect = rows["effect change-001/execute (family ledger)"][0]
    assert effect == ["—", "completed · ran here", "completed · ran in approve"]
    assert rows["tool calls not run (dry run)"][0] == ["1", "0", "0"]
    # the context keys whose values differ, and only those (issue 21)
    assert rows["context change.result"] == (
        ["—", '"applied change-001"', '"Change rejected: too risky"'],
        True,
    )
    assert rows["context approval.reason"] == (["—", "—", '"too risky"'], True)
    assert not any(what == "context approval.request" for what in rows)  # all the same
    assert c.shared_events == len(s.events) == s.history[-1].events
    text = c.text()
    assert max(len(line) for line in text.splitlines()) <= 100  # fits a terminal
    assert "* decision" in text and "  node proposal_agent" in text
    assert f"{c.shared_events} events in common" in text
    html = c.html()
    assert html.count("class='im-diff'") == sum(d for _, _, d in c.rows())
    graphs = c.graphs()
    executor = [g.node("executor_agent") for g in graphs]
    assert [n.highlight for n in executor] == [True, True, True]
    assert not graphs[0].node("proposal_agent").highlight
    pictures = images(html)
    assert len(pictures) == 3  # one graph per session, as images (they read right untrusted)
    assert sum(p.count('stroke="#d81b60"') for p in pictures) > 0  # outlined in the SVGs
    assert html.count(">differs</span>") == sum(d for _, _, d in c.rows())  # said in words too
    assert "not run (dry run)" in html
    bundle = c._repr_mimebundle_()
    assert bundle["text/plain"] == text and bundle["text/html"] == html


def test_compare_needs_two_sessions_and_names_for_each() -> None:
    team, s, _ = paused()
    with pytest.raises(UsageError):
        Compare(team, s)
    with pytest.raises(UsageError):
        Compare(team, s, s.fork("f"), names=["one"])
    with pytest.raises(UsageError):
        Compare(team, s, "not a session")
    ops = build_ops_agent()
    a = InMemoryAgentSession.of("a")
    ops.prompt("delete user 1001").session(a).call()
    c = Compare(ops, a, a.fork("b"))  # no graph: rows and timelines still
    assert c.graphs() == [] and "status" in c.text()


def test_each_move_draws_once(monkeypatch: Any) -> None:
    """Drawing forks the session at the checkpoint and renders its graph: a slider move,
    a show() and a refresh() each do it once, not twice."""
    team, s, _ = paused()
    h = History(team, s)
    drawn: list[int] = []
    real = History._draw

    def counted(self: History) -> None:
        drawn.append(self.index)
        real(self)

    monkeypatch.setattr(History, "_draw", counted)
    h.click("show", index=1)
    h.show(0)
    h.show(0)  # the same checkpoint again: drawn again (a person asked for it)
    h.refresh()  # back to the newest
    assert drawn == [1, 0, 0, h.checkpoints[-1].index]


@hsettings(max_examples=30, deadline=None)
@given(names=st.lists(st.text(min_size=1, max_size=150), min_size=2, max_size=5))
def test_compare_text_fits_100_columns_whatever_the_names(names: list[str]) -> None:
    team, s, _ = paused()
    forks = [s.fork(f"f{i}", effects="dry-run") for i in range(len(names))]
    ApprovalWidget(team, forks[0]).approve(reviewer="x" * 200)  # (a name is at most 200 characters)
    text = Compare(team, *forks, names=names).text()
    assert max(len(line) for line in text.splitlines()) <= 100
