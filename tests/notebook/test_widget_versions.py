"""Widgets on an AgentTable (R62): a session resumes on the version it paused under, or on
a newer one that migrates it; a version no agent here runs is said before any click, in a
sentence, and nothing can be decided from that view."""

from __future__ import annotations

from typing import Any

import pytest
from tests._helpers import paused_change

from intermission import (
    AgentTable,
    AgentVersionError,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.examples import build_change_graph
from intermission.notebook import ApprovalWidget, HITLPanel, Inbox, ResumeWidget, settings
from intermission.notebook.resume import decision_widget
from intermission.stores import MemoryStore

V1_ONLY = (
    "This session paused on ops@1, which is not served here (served: ops@2); "
    "nothing can be decided from this view."
)


@pytest.fixture(autouse=True)
def _person(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "autopilot", False)  # a person at the page, not nbval
    monkeypatch.setattr(settings, "reviewer", "alice")


def _ops(version: str, ran: list[str], *, migrates: bool = False) -> Any:
    """``ops`` at ``version``: its ``deploy`` tool waits for approval and counts its runs
    in ``ran``; ``migrates``: it migrates sessions paused on version 1 (noting that it
    did). Its model answers by turn, so any version can resume any of these sessions."""

    @tool
    def deploy(target: str) -> str:
        """Deploy a target."""
        ran.append(target)
        return f"deployed {target}"

    script = [[ToolCall("deploy", {"target": "web"}, id="c1")], f"done on {version}"]
    builder = (
        ReActAgent.of(ScriptedModel(script))
        .name("ops")
        .version(version)
        .tools(deploy)
        .interceptor(HITLInterceptor().on_tool("deploy"))
    )
    if migrates:
        builder = builder.migrates_from("1", lambda s: s.context.put("migrated", True))
    return builder.build()


def _paused_v1(ran: list[str], store: MemoryStore | None = None) -> InMemoryAgentSession:
    s = InMemoryAgentSession.of("ops-1")
    _ops("1", ran).prompt("deploy web").session(s).call()
    assert s.is_pending and s.agent_version == "1"
    if store is not None:
        store.save(s)
    return s


def _closed(panel: HITLPanel) -> bool:
    return not panel.can_all and not any(c["open"] for c in panel.calls)


@pytest.mark.parametrize("stored", [True, False])
def test_a_version_not_served_is_said_before_a_click_and_a_click_changes_nothing(
    stored: bool,
) -> None:
    ran1: list[str] = []
    ran2: list[str] = []
    store = MemoryStore() if stored else None
    s = _paused_v1(ran1, store)
    session = store.load("ops-1") if store is not None else s
    before = session.to_json()
    table = AgentTable({"ops": [_ops("2", ran2)]})
    panel = HITLPanel(table, session, store=store)
    assert panel.version == "agent ops@1"
    assert panel.unserved == V1_ONLY  # before any click
    assert _closed(panel) and not panel.can_resume
    assert "im-error" not in panel.status
    panel.click("decide", call_uuid="c1", verdict="approve")
    panel.click("all", verdict="approve")
    panel.wait()
    assert V1_ONLY in panel.status and "Error" not in panel.status  # a sentence, no class
    with pytest.raises(AgentVersionError, match="ops@1"):  # the code twin: the typed error
        panel.approve_all()
    assert ran1 == [] and ran2 == []
    now = store.load("ops-1") if store is not None else s
    assert now.to_json() == before and now.is_pending and not now.hitl.decisions
    if store is not None:
        assert [r.action for r in store.audit("ops-1")] == []  # nothing tried was recorded


def test_a_table_serving_both_versions_resumes_the_session_on_its_own() -> None:
    ran1: list[str] = []
    ran2: list[str] = []
    store = MemoryStore()
    _paused_v1(ran1, store)
    v1 = _ops("1", ran1)
    table = AgentTable({"ops": [v1, _ops("2", ran2, migrates=True)]})
    panel = HITLPanel(table, store.load("ops-1"), store=store)
    assert panel.version == "agent ops@1" and panel.unserved == "" and panel.can_all
    panel.click("decide", call_uuid="c1", verdict="approve")
    assert panel.wait().content == "done on 1"
    assert ran1 == ["web"] and ran2 == []  # pinned: nothing migrates unless asked
    s = store.load("ops-1")
    assert s.status == "done" and s.agent_version == "1" and "migrated" not in s.context
    assert "agent.migrated" not in [r.action for r in store.audit("ops-1")]


def test_a_newer_version_that_migrates_the_session_approves_and_migrates_it() -> None:
    ran1: list[str] = []
    ran2: list[str] = []
    store = MemoryStore()
    _paused_v1(ran1, store)
    table = AgentTable({"ops": [_ops("2", ran2, migrates=True)]})
    panel = HITLPanel(table, store.load("ops-1"), store=store, reviewer="bob")
    assert panel.version == "agent ops@1" and panel.unserved == "" and panel.can_all
    panel.click("decide", call_uuid="c1", verdict="approve")
    assert panel.wait().content == "done on 2"
    assert ran1 == [] and ran2 == ["web"]
    s = store.load("ops-1")
    assert s.status == "done" and s.agent_version == "2" and s.context.get("migrated") is True
    (migrated,) = [r for r in store.audit("ops-1") if r.action == "agent.migrated"]
    assert migrated.reason == "migrated ops 1 → 2" and migrated.actor == "bob"
    assert panel.version == "agent ops@2"  # the view shows what the session runs on now


def test_in_memory_a_migrating_table_resumes_the_session_itself() -> None:
    ran1: list[str] = []
    ran2: list[str] = []
    s = _paused_v1(ran1)
    table = AgentTable({"ops": [_ops("2", ran2, migrates=True)]})
    panel = HITLPanel(table, s)
    assert panel.approve_all().content == "done on 2"
    assert ran2 == ["web"] and s.agent_version == "2" and s.context.get("migrated") is True
    assert "agent.migrated" in [e.action for e in s.audit_noted]


def test_a_migration_made_elsewhere_shows_at_the_next_read() -> None:
    ran: list[str] = []
    store = MemoryStore()
    _paused_v1(ran, store)
    both = AgentTable({"ops": [_ops("1", ran), _ops("2", ran, migrates=True)]})
    old = AgentTable({"ops": [_ops("1", ran)]})
    follows = HITLPanel(both, store.load("ops-1"), store=store)
    stale = HITLPanel(old, store.load("ops-1"), store=store)
    assert follows.version == stale.version == "agent ops@1" and stale.unserved == ""
    with store.resume("ops-1") as s:  # another process: python -m intermission migrate
        both.migrate(s, to="2")
    for panel in (follows, stale):
        assert panel.runner.sync()  # what the poll does every few seconds
        assert panel.version == "agent ops@2"
    assert follows.unserved == "" and follows.can_all
    assert stale.unserved == (
        "This session paused on ops@2, which is not served here (served: ops@1); "
        "nothing can be decided from this view."
    )
    assert _closed(stale)
    assert ran == []


def test_a_click_that_races_a_migration_elsewhere_says_so_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []
    store = MemoryStore()
    _paused_v1(ran, store)
    old = AgentTable({"ops": [_ops("1", ran)]})
    panel = HITLPanel(old, store.load("ops-1"), store=store)
    assert panel.can_all
    new = AgentTable({"ops": [_ops("2", ran, migrates=True)]})
    with store.resume("ops-1") as s:
        new.migrate(s, to="2")
    before = store.load("ops-1").to_json()
    # the click lands before this view read the store again: the page still offered it
    monkeypatch.setattr(panel.runner, "sync", lambda: False)
    panel.click("decide", call_uuid="c1", verdict="approve")
    panel.wait()
    said = (
        "This session paused on ops@2, which is not served here (served: ops@1); "
        "nothing can be decided from this view."
    )
    assert said in panel.status and "Error" not in panel.status
    assert panel.unserved == said and _closed(panel) and panel.version == "agent ops@2"
    assert store.load("ops-1").to_json() == before and ran == []


def test_an_approval_widget_on_a_team_version_not_served_decides_nothing() -> None:
    team, s, log = paused_change()
    other = build_change_graph(deadline_ms=60_000)  # another definition: another version
    assert other.version != team.version
    w = ApprovalWidget(AgentTable({"change": [other]}), s)
    paused, served = f"change@{s.agent_version}", f"change@{other.version}"
    assert w.version == f"agent {paused}"
    assert w.unserved == (
        f"This session paused on {paused}, which is not served here (served: {served}); "
        "nothing can be decided from this view."
    )
    assert not w.can_decide and "Change plan awaits human review" in w.request
    assert "executor_agent" in w.graph  # the graph is drawn all the same
    before = s.to_json()
    w.click("approve")
    assert w.unserved in w.status and s.to_json() == before and log == []
    ok = ApprovalWidget(AgentTable({"change": [other, team]}), s)
    assert ok.unserved == "" and ok.can_decide
    assert ok.approve().content == "Change executed: applied change-001" and log == ["change-001"]


def test_the_right_widget_for_a_table_and_a_resume_widget_that_cannot_resume() -> None:
    _team, s, _ = paused_change()
    other = build_change_graph(deadline_ms=60_000)
    assert isinstance(decision_widget(AgentTable({"change": [other]}), s), ApprovalWidget)
    ran: list[str] = []
    fresh = InMemoryAgentSession.of("r")
    v1 = _ops("1", ran)
    v1.prompt("deploy web").session(fresh).call()
    HITLPanel(v1, fresh).approve_all()  # done: a plain Resume is what is left
    w = ResumeWidget(AgentTable({"ops": [_ops("2", ran)]}), fresh)
    assert w.version == "agent ops@1" and "ops@1" in w.unserved and not w.can_resume


def test_the_inbox_shows_versions_and_opens_on_a_table() -> None:
    ran1: list[str] = []
    ran2: list[str] = []
    store = MemoryStore()
    _paused_v1(ran1, store)
    inbox = Inbox(store, AgentTable({"ops": [_ops("2", ran2)]}), poll_s=None)
    assert "<th>version</th>" in inbox.table
    (item,) = store.pending()
    if getattr(item, "agent_version", None) is None:  # a store that lists no version yet
        assert "<td>—</td>" in inbox.table
    else:
        assert "<td>ops@1 <span class='im-error'>(not served here)</span></td>" in inbox.table
    panel = inbox.open_session("ops-1")
    assert isinstance(panel, HITLPanel) and panel.unserved == V1_ONLY and _closed(panel)
    # a plain dict of versions (oldest first) is a table too: the session's own resumes it
    both = Inbox(store, {"ops": [_ops("1", ran1), _ops("2", ran2)]},
                 poll_s=None)  # fmt: skip
    opened = both.open_session("ops-1")
    assert opened.unserved == "" and opened.version == "agent ops@1"
    assert opened.approve_all().content == "done on 1" and ran1 == ["web"] and ran2 == []
    assert both.refresh() == []
