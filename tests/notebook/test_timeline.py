"""Timeline (R34): all requests, escaping, determinism under a fake clock, JSON lines."""

from __future__ import annotations

import json
import re

from intermission import (
    HITL,
    FakeClock,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    SequentialIds,
    ToolCall,
    tool,
)
from intermission.notebook import Timeline


@tool
def send(to: str, body: str) -> str:
    """Send a message."""
    return f"sent <b>{body}</b> to {to}"


def run_session() -> InMemoryAgentSession:
    model = ScriptedModel(
        [[ToolCall("send", {"to": "<script>alert(1)</script>", "body": "hi"})], "Done <i>ok</i>"],
        ids=SequentialIds(),
    )
    agent = (
        ReActAgent.of(model).name("mailer").tools(send)
        .interceptor(HITLInterceptor().on_tool("send", lambda t, a: "check <script>x</script>"))
        .clock(FakeClock(start_ms=0, step_ms=1.5)).ids(SequentialIds()).build()
    )  # fmt: skip
    s = InMemoryAgentSession.of("t")
    agent.prompt("mail <script>evil()</script>").session(s).call()
    HITL.submit(s, "call-1", HITLDecision.approve().comment("<b>fine</b>").reviewer("lead"))
    agent.prompt().session(s).call()
    s.once("mail/receipt", lambda: "ok")
    return s


def test_timeline_shows_every_request_and_escapes_everything() -> None:
    html = Timeline(run_session()).html()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>fine</b>" not in html and "&lt;b&gt;fine&lt;/b&gt;" in html
    assert html.count("class='im-req-head'>Request") == 2
    assert "new prompt" in html and "resume" in html
    assert "by lead" in html and "awaiting human" in html
    assert "mail/receipt" in html and "completed" in html


def test_timeline_is_byte_identical_under_a_fake_clock() -> None:
    assert Timeline(run_session()).html() == Timeline(run_session()).html()


def test_jsonl_export_round_trips_every_event() -> None:
    from intermission.events import event_adapter

    s = run_session()
    lines = Timeline(s).to_jsonl().splitlines()
    assert len(lines) == len(s.events)
    assert [event_adapter.validate_json(x).kind for x in lines] == s.events.kinds()
    assert json.loads(lines[0])["kind"] == "run_start"


def test_live_mode_redraws_while_a_stream_runs() -> None:
    from intermission.examples import build_change_graph
    from intermission.notebook import GraphView

    class Handle:
        def __init__(self) -> None:
            self.updates = 0

        def update(self, obj: object) -> None:
            self.updates += 1

    team = build_change_graph()
    s = InMemoryAgentSession.of("live")
    view, timeline = GraphView(team, s), Timeline(s)
    view._handle, timeline._handle = Handle(), Handle()
    events = view.follow(team.prompt("Upgrade").session(s).stream())
    assert events[-1].kind == "team_end" and s.is_pending
    node_events = sum(e.kind.startswith("node_") for e in events)
    assert view._handle.updates == node_events + 2  # node events, team end, final redraw
    kinds = [e.kind for e in timeline.follow(iter(events))]
    assert kinds == [e.kind for e in events] and timeline._handle.updates == len(events) + 1


def test_one_table_per_session_with_short_ids_and_scoped_resets() -> None:  # issue 15
    html = Timeline(run_session()).html()
    assert html.count("<table ") == 1 and html.count("<colgroup>") == 1  # columns line up
    assert html.count("class='im-req-row'") == 3  # two requests and the ledger
    # Lab right-aligns and fixes table cells in outputs: the scoped CSS resets that
    assert ".im-timeline td" in html and "text-align:left!important" in html
    uuid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    from intermission.notebook._html import id_html

    short = id_html(uuid)
    assert f"title='{uuid}'" in short and ">0f8fad5b…<" in short


def test_a_stored_timeline_keeps_its_meaning_without_its_stylesheet() -> None:  # issue 29
    """Untrusted, JupyterLab drops the <style>: every cell says inline that it is aligned
    left (Lab right-aligns table cells), and every badge carries its colour inline."""
    page = Timeline(run_session()).html()
    body = page.split("</style>", 1)[1]
    cells = re.findall(r"<t[dh]\b[^>]*>", body)
    assert cells and all("text-align:left" in c for c in cells), [
        c for c in cells if "text-align:left" not in c
    ][:3]
    badges = re.findall(r"<span class='im-badge[^>]*>", body)
    assert badges and all(re.search(r"background:#[0-9a-f]{6}", b) for b in badges)
    assert all("color:#fff" in b for b in badges)
