"""The interrupt rules where an adversary found them bent (in process, one MemoryStore):
JSON-exact decisions, expired interrupts, re-sent resumes after a second pause, retried
runs. A refused run leaves the stored session exactly as it was."""

from __future__ import annotations

import itertools
from typing import Any

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from starlette.testclient import TestClient  # noqa: E402

from intermission.agui import agui_app  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from ._server import parse_sse  # noqa: E402
from .agents import AGENTS, outlast_hasty  # noqa: E402

_n = itertools.count()


class World:
    def __init__(self) -> None:
        self.store = MemoryStore()
        self.client = TestClient(agui_app(AGENTS, self.store), base_url="http://127.0.0.1")

    def post(self, agent: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
        r = self.client.post(f"/agents/{agent}", json=body)
        assert r.status_code == 200, r.text
        return parse_sse(r.text)

    def start(self, agent: str, thread: str, run: str = "r0") -> list[str]:
        events = self.post(agent, {"threadId": thread, "runId": run, "messages": [
            {"id": f"u{next(_n)}", "role": "user", "content": "go"}]})  # fmt: skip
        return [i["id"] for i in events[-1][1]["outcome"]["interrupts"]]

    def resume(self, agent: str, thread: str, run: str, ids: list[str], payload: Any,
               reviewer: str = "alice") -> list[tuple[str, Any]]:  # fmt: skip
        entries = [{"interruptId": i, "status": "resolved", "payload": payload,
                    "metadata": {"reviewer": reviewer}} for i in ids]  # fmt: skip
        return self.post(agent, {"threadId": thread, "runId": run, "messages": [],
                                 "resume": entries})  # fmt: skip


def types(events: list[tuple[str, Any]]) -> list[str]:
    return [e["type"] for _, e in events]


def test_edited_args_true_and_1_are_different_decisions() -> None:
    w = World()
    ids = w.start("value", "V")
    first = w.resume("value", "V", "ra", ids, {"approved": True, "editedArgs": {"value": True}})
    assert types(first)[-1] == "RUN_FINISHED"
    before = w.store.load("V").to_json()
    for other in (1, 1.0, "true", [True]):
        second = w.resume("value", "V", "rb", ids,
                          {"approved": True, "editedArgs": {"value": other}}, "bob")  # fmt: skip
        assert types(second)[-1] == "RUN_ERROR", other
        assert second[-1][1]["code"] == "DECISION_CONFLICT" and "alice" in second[-1][1]["message"]
        assert w.store.load("V").to_json() == before
    # the same decision again is a replay of the first run, key order aside
    again = w.resume("value", "V", "ra", ids, {"approved": True, "editedArgs": {"value": True}})
    assert types(again) == types(first)


def test_an_expired_interrupt_does_not_strand_its_thread() -> None:
    """``hasty``'s approval expires soon after it is asked for: deciding it then is refused with
    nothing changed; it is not listed; a run without a resume goes on to the resume that
    rejects it as ``system:deadline`` (the core's rule), and the tool never runs. (A run
    that carries a new message as well: tests/agui/test_vanished.py.)"""
    for body in ({}, {"messages": []}):
        w = World()
        ids = w.start("hasty", "H")
        outlast_hasty()
        before = w.store.load("H").to_json()
        for payload in ({"approved": True}, {"approved": False, "reason": "late"}):
            late = w.resume("hasty", "H", "rl", ids, payload)
            assert late[-1][1]["type"] == "RUN_ERROR"
            assert late[-1][1]["code"] == "INTERRUPT_EXPIRED"
            assert w.store.load("H").to_json() == before
        assert w.client.get("/interrupts").json()["interrupts"] == []
        assert w.client.get("/threads/H").json()["interrupts"] == []
        done = w.post("hasty", {"threadId": "H", "runId": "rn", "messages": [], **body})
        assert done[-1][1]["type"] == "RUN_FINISHED", done[-1]
        assert done[-1][1]["outcome"]["type"] == "success"
        session = w.store.load("H")
        (decision,) = [e.decision for e in session.events if e.kind == "hitl_decided"]
        assert decision.verdict == "reject" and decision.reviewer == "system:deadline"
        assert not any(e.kind == "tool_call_end" for e in session.events)


def test_the_same_resume_after_a_second_pause_replays_the_first_outcome() -> None:
    """``twice`` pauses on delete 1, then (resumed) on delete 2: re-sending the first resume
    (a client retrying after a lost connection) gets the very events the first delivery
    got, the second interrupt included, and changes nothing."""
    w = World()
    ids = w.start("twice", "W")
    first = w.resume("twice", "W", "r2", ids, {"approved": True})
    assert first[-1][1]["outcome"]["type"] == "interrupt"
    before = w.store.load("W").to_json()
    again = w.resume("twice", "W", "r2", ids, {"approved": True})
    assert [e for _, e in again] == [e for _, e in first]
    assert w.store.load("W").to_json() == before
    other = w.resume("twice", "W", "r3", ids, {"approved": False, "reason": "no"}, "bob")
    assert other[-1][1]["code"] == "DECISION_CONFLICT"


def test_a_retried_run_id_replays_that_run_and_old_history_is_no_prompt() -> None:
    """A client that retries a POST (same ``runId``) gets that run again, not a new request;
    a run whose last user message the thread already has (``runAgent({})`` re-sends the
    history) is ``NO_PROMPT``, not the stale request run again."""
    w = World()
    user = {"id": "u1", "role": "user", "content": "go"}
    go = {"threadId": "R", "runId": "r1", "messages": [user]}
    first = w.post("ops", go)
    ids = [i["id"] for i in first[-1][1]["outcome"]["interrupts"]]
    done = w.resume("ops", "R", "r2", ids, {"approved": True})
    assert done[-1][1]["outcome"]["type"] == "success"
    before = w.store.load("R").to_json()
    assert [e for _, e in w.post("ops", go)] == [e for _, e in first]
    assert w.store.load("R").to_json() == before
    history = w.client.get("/threads/R/events")
    (snapshot,) = [e for _, e in parse_sse(history.text) if e["type"] == "MESSAGES_SNAPSHOT"]
    for messages in (go["messages"], snapshot["messages"]):
        stale = w.post("ops", {"threadId": "R", "runId": "r3", "messages": messages})
        assert types(stale) == ["RUN_STARTED", "RUN_ERROR"]
        assert stale[-1][1]["code"] == "NO_PROMPT"
        assert w.store.load("R").to_json() == before
    new = [*snapshot["messages"], {"id": "u2", "role": "user", "content": "again"}]
    again = w.post("ops", {"threadId": "R", "runId": "r4", "messages": new})
    assert again[-1][1]["outcome"]["type"] == "interrupt"


def test_a_thread_whose_message_window_is_full_never_runs_a_re_sent_message_again() -> None:
    """Message ids were noted by position in the session's messages, which keep a window
    (50 by default) and drop the oldest: once the window was full, the new user message's
    id was not noted and the older ones pointed at other messages. Before: from round 26
    of this thread on, re-sending the history (``runAgent({})``, a retry under a new
    ``runId``) ran the last request again — a second approval of the same tool call — and
    the pause's ``MESSAGES_SNAPSHOT`` gave the user's message another message's id."""
    w = World()
    history: list[dict[str, Any]] = []
    for k in range(30):
        user = {"id": f"msg-{k}", "role": "user", "content": f"note {k}"}
        history.append(user)
        paused = w.post("note", {"threadId": "W", "runId": f"r{k}", "messages": history})
        assert paused[-1][1]["outcome"]["type"] == "interrupt", (k, types(paused))
        (snapshot,) = [e for _, e in paused if e["type"] == "MESSAGES_SNAPSHOT"]
        users = [m for m in snapshot["messages"] if m["role"] == "user"]
        assert users[-1] == user, (k, users[-1])  # the client's own id for its message
        ids = [i["id"] for i in paused[-1][1]["outcome"]["interrupts"]]
        done = w.resume("note", "W", f"d{k}", ids, {"approved": True})
        assert done[-1][1]["outcome"]["type"] == "success"
        for again in (history, snapshot["messages"]):  # re-sent, under a new run id
            stale = w.post("note", {"threadId": "W", "runId": f"x{k}", "messages": again})
            assert types(stale) == ["RUN_STARTED", "RUN_ERROR"], (k, types(stale))
            assert stale[-1][1]["code"] == "NO_PROMPT"
    assert len(w.store.load("W").messages) == 50  # (the window was full)


def test_a_late_or_conflicting_resume_is_a_refused_decision_in_the_audit_trail() -> None:
    """Refused before anything is recorded (the deadline passed; another outcome stands), a
    resume is still a refused decision the audit trail keeps — who tried what and why — as
    the CLI and the Python API keep it, and the session is left as it was."""
    w = World()
    ids = w.start("hasty", "HA")
    outlast_hasty()
    before = w.store.raw_row("HA")
    late = w.resume("hasty", "HA", "rl", ids, {"approved": True}, reviewer="mallory")
    assert late[-1][1]["code"] == "INTERRUPT_EXPIRED"
    assert w.store.raw_row("HA") == before
    (entry,) = [r for r in w.store.audit("HA") if r.action == "decision.refused"]
    assert (entry.actor, entry.via, entry.target) == ("mallory", "agui", ids[0])
    assert entry.detail["error"] == "DeadlinePassedError"
    assert entry.detail["verdict"] == "approve"
    assert w.store.verify_audit("HA")
    # an outcome stands: a different decision is refused and recorded as refused
    ids = w.start("value", "VA")
    assert types(w.resume("value", "VA", "ra", ids, {"approved": True}))[-1] == "RUN_FINISHED"
    before = w.store.raw_row("VA")
    other = w.resume("value", "VA", "rb", ids, {"approved": False, "reason": "no"}, "bob")
    assert other[-1][1]["code"] == "DECISION_CONFLICT"
    assert w.store.raw_row("VA") == before
    (entry,) = [r for r in w.store.audit("VA") if r.action == "decision.refused"]
    assert (entry.actor, entry.target, entry.detail["verdict"]) == ("bob", ids[0], "reject")
    assert entry.detail["error"] == "DecisionConflictError" and "alice" in (entry.reason or "")


def test_a_resume_naming_an_unknown_interrupt_is_a_refused_decision_in_the_audit_trail() -> None:
    """Issue 39: every refused decision is on the trail. A resume naming an interrupt the
    thread does not hold (a forged or stale id) was refused with UNKNOWN_INTERRUPT and left
    no record; now it is kept as who tried what, as the CLI keeps an unknown ``--call``."""
    w = World()
    w.start("value", "UN")
    before = w.store.raw_row("UN")
    refused = w.resume("value", "UN", "ru", ["forged-id"], {"approved": True}, "mallory")
    assert refused[-1][1]["code"] == "UNKNOWN_INTERRUPT"
    assert w.store.raw_row("UN")[:2] == before[:2]  # the session as it was
    (entry,) = [r for r in w.store.audit("UN") if r.action == "decision.refused"]
    assert (entry.actor, entry.via, entry.target) == ("mallory", "agui", "forged-id")
    assert entry.detail["error"] == "UnknownTaskError" and entry.detail["verdict"] == "approve"
    assert w.store.verify_audit("UN")
