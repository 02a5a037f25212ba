"""Text that reaches a person is shown, never obeyed (R42, R50; issue 20 case 12): every
plain-text form escapes control characters like the CLI, every HTML form neutralises the
bidi controls, and Compare renders for every kind of agent."""

from __future__ import annotations

import re
from typing import Any

import pytest

from intermission import (
    END,
    HITL,
    GraphSpec,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    TeamAgent,
    ToolCall,
    tool,
)
from intermission.notebook import (
    ApprovalWidget,
    Compare,
    GraphView,
    History,
    HITLPanel,
    Inbox,
    Stepper,
    Timeline,
)
from intermission.stores import MemoryStore

# what a model (or a tool, or a server) may say: a cursor move and carriage return that
# forge a line on a terminal, and a right-to-left override that reverses what follows
FORGED = "ok\x1b[2K\rApproved by security\x07 \u202eexe.tsil_etihw\u202c \u2066x\u2069"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _react() -> ReActAgent:
    @tool
    def deploy(target: str, why: str) -> str:
        """Deploy ``target``."""
        return f"deployed {target}: {why}"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return (
            f"{FORGED} {seen[-1]}"
            if seen
            else [ToolCall("deploy", {"target": "prod", "why": FORGED})]
        )

    hitl = HITLInterceptor().on_tool("deploy", lambda trace, args: f"the model says {args['why']}")
    return (
        ReActAgent.of(ScriptedModel(script)).name(f"ops{FORGED}").tools(deploy)
        .interceptor(hitl).build()
    )  # fmt: skip


def _team() -> TeamAgent:
    writer = (
        ReActAgent.of(ScriptedModel([FORGED] * 10)).name("writer").output_key("proposal")
        .build()
    )  # fmt: skip

    def review(ctx: Any, node: Any) -> None:
        if ctx.get("approval.decision") is None:
            assert ctx.session is not None
            ctx.session.pending(True, ctx.get("proposal"))

    spec = GraphSpec("forged")
    spec.add_start().link_add("writer")
    spec.add_agent(writer).link_add("review")
    spec.add_activity("review").title(FORGED).task(review).link_add(END)
    spec.add_end()
    return TeamAgent.of().name("forged").graph(spec).build()


def _paused_react(sid: str = f"s{FORGED}") -> tuple[ReActAgent, InMemoryAgentSession]:
    agent = _react()
    s = InMemoryAgentSession(sid)
    agent.prompt(f"deploy {FORGED}").session(s).call()
    assert s.is_pending
    return agent, s


def _no_raw(text: str) -> None:
    assert not RAW.search(text), repr(text)
    assert "\\x1b" in text or "\\u202e" in text, text  # shown, as escapes


def _react_pair() -> tuple[Any, InMemoryAgentSession, InMemoryAgentSession]:
    agent, a = _paused_react()
    b = a.fork(f"b{FORGED}")
    HITL.approve_all(b, reviewer="alice")
    agent.prompt().session(b).call()
    return agent, a, b


def _team_paused() -> tuple[TeamAgent, InMemoryAgentSession]:
    team = _team()
    g = InMemoryAgentSession(f"g{FORGED}")
    team.prompt("go").session(g).call()
    assert g.pending_reason == FORGED
    return team, g


PLAIN_FORMS: dict[str, Any] = {
    "Compare.text()": lambda: Compare(*_react_pair()).text(),
    "Compare text/plain": lambda: Compare(*_react_pair())._repr_mimebundle_()["text/plain"],
    "Compare.text() of a graph": lambda: (lambda t, g: Compare(t, g, g.fork("x")).text())(
        *_team_paused()
    ),
    "repr(ApprovalWidget)": lambda: repr(ApprovalWidget(*_team_paused())),
    "GraphView text/plain": lambda: GraphView(*_team_paused())._repr_mimebundle_()["text/plain"],
    "repr(GraphView)": lambda: repr(GraphView(*_team_paused())),
    "repr(HITLPanel)": lambda: repr(HITLPanel(*_paused_react())),
    "repr(History)": lambda: repr(History(*_paused_react())),
    "repr(Stepper)": lambda: (lambda t, g: repr(Stepper(t.spec, g)))(*_team_paused()),
}


@pytest.mark.parametrize("form", list(PLAIN_FORMS))
def test_plain_text_forms_escape_control_characters_like_the_cli(form: str) -> None:
    _no_raw(PLAIN_FORMS[form]())


def test_html_forms_neutralise_bidi_controls_in_model_tool_and_server_text() -> None:
    agent, a = _paused_react()
    store = MemoryStore()
    store.save(a)
    panel = HITLPanel(agent, a)
    pages = [
        *_page_texts(panel),
        Timeline(a).html(),
        *_page_texts(Inbox(store, {a.agent: _react}, poll_s=None)),
    ]
    assert not BIDI.search("".join(pages)) and "\\u202e" in "".join(pages)  # (the panel)
    b = a.fork("b")
    HITL.approve_all(b, reviewer="alice")
    agent.prompt().session(b).call()
    pages.append(Compare(agent, a, b).html())
    pages.append(Timeline(b).html())
    team = _team()
    g = InMemoryAgentSession("g")
    team.prompt("go").session(g).call()
    pages += _page_texts(ApprovalWidget(team, g))
    pages.append(Compare(team, g, g.fork("g2")).html())
    text = "\n".join(pages)
    assert "exe.tsil_etihw" in text and "\\u202e" in text  # the text is there, shown
    assert not BIDI.search(text), [m.start() for m in BIDI.finditer(text)]
    # the Inbox picker labels a session whose id carries them with an escaped label
    store.save(_paused_react(f"id{FORGED}")[1])
    inbox = Inbox(store, {a.agent: _react}, poll_s=None)
    labels = [o["label"] for o in inbox.options]
    assert labels and not any(BIDI.search(label) for label in labels), labels
    assert f"id{FORGED}" in [o["id"] for o in inbox.options]


def _page_texts(widget: Any) -> list[str]:
    """Every text a widget's page shows: its synced traits, but its ES module, its
    ``outcome`` (the session's data as stored, for code to read, never drawn) and the ids
    the page only sends back (an option's value, the preselected session)."""
    out: list[str] = []
    hidden = ("_esm", "_css", "outcome", "selected", "id")
    stack: list[Any] = [v for k, v in widget.get_state().items() if k not in hidden]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k not in hidden)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return out


def test_compare_renders_for_every_kind_of_agent() -> None:
    agent, a = _paused_react("react")
    b = a.fork("react-b")
    HITL.approve_all(b, reviewer="alice")
    agent.prompt().session(b).call()
    html = Compare(agent, a, b).html()  # a ReAct agent has no graph: no graphs shown
    assert "class='im-cmp-graphs'" not in html and "<table" in html
    bundle = Compare(agent, a, b)._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"} and "status" in bundle["text/plain"]
    team = _team()
    g = InMemoryAgentSession("team")
    team.prompt("go").session(g).call()
    assert "class='im-cmp-graphs'" in Compare(team, g, g.fork("team-b")).html()
    spec_only = Compare(team.spec, g, g.fork("team-c"))
    assert "<table " in spec_only.html()
