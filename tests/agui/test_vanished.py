"""A new user message never vanishes (issue 27, case 7): ``serve`` on SQLite and a real
PostgreSQL, raw HTTP.

A run that carries a new message to a thread whose interrupt expired, or whose decision
was recorded in another client (the store, as the CLI or a widget would), first applies
what is settled — the resume the thread waits for — and then runs the message, in the same
AG-UI run: one ``RUN_STARTED``, one ``RUN_FINISHED``, the message in the stored history,
and a replay (the thread's log, or the same ``runId`` again) sends the very same events.
If applying the decisions pauses the thread again on new interrupts, the message cannot
run: the run ends with ``RUN_ERROR INTERRUPTS_OPEN`` naming them, the message not stored."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from intermission import HITL, HITLDecision  # noqa: E402
from intermission.stores.open import open_store  # noqa: E402

from ._server import Server, effects, types  # noqa: E402
from .agents import outlast_hasty  # noqa: E402


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, str, Path]]:
    tmp = tmp_path_factory.mktemp("vanished")
    if request.param == "sqlite":
        target = str(tmp / "s.db")
    else:
        from tests._helpers import fresh_pg

        target = pg_dsn()
        fresh_pg().close()
    log = tmp / "effects.log"
    server = Server(target, log)
    yield server, target, log
    server.stop()


def _start(server: Server, agent: str, thread: str) -> str:
    go = [{"id": "u1", "role": "user", "content": "go"}]
    events = server.run(agent, {"threadId": thread, "runId": "r1", "messages": go})
    (interrupt,) = events[-1][1]["outcome"]["interrupts"]
    return str(interrupt["id"])


def _message(thread: str, text: str = "and now this") -> dict[str, Any]:
    # the client's history as it has it, plus the new message
    return {"threadId": thread, "runId": "r2", "messages": [
        {"id": "u1", "role": "user", "content": "go"},
        {"id": "u2", "role": "user", "content": text}]}  # fmt: skip


def _decide_elsewhere(target: str, thread: str) -> None:
    store = open_store(target)
    try:
        session = store.load(thread)
        (task,) = HITL.pending_tasks(session)
        HITL.submit(session, task, HITLDecision.approve().reviewer("cli-user"))
        store.save(session)
    finally:
        store.close()


def _load(target: str, thread: str) -> Any:
    store = open_store(target)
    try:
        return store.load(thread)
    finally:
        store.close()


def test_a_message_to_a_thread_whose_interrupt_expired_runs_after_the_expiry(
    world: tuple[Server, str, Path],
) -> None:
    server, target, log = world
    thread = "t-" + uuid.uuid4().hex[:8]
    old = _start(server, "hasty", thread)  # expires soon after it is asked for
    outlast_hasty()
    events = server.run("hasty", _message(thread, "start over"))
    assert events[-1][1]["outcome"]["type"] == "interrupt"
    (new,) = events[-1][1]["outcome"]["interrupts"]
    assert new["id"] != old
    session = _load(target, thread)
    assert [m.content for m in session.messages if m.role == "user"] == ["go", "start over"]
    decisions = [e.decision for e in session.events if e.kind == "hitl_decided"]
    assert [(d.verdict, d.reviewer) for d in decisions] == [("reject", "system:deadline")]
    assert effects(log, thread) == []
    _same_again(server, "hasty", thread, events)


def test_a_message_to_a_thread_decided_elsewhere_runs_after_the_decision(
    world: tuple[Server, str, Path],
) -> None:
    server, target, log = world
    thread = "t-" + uuid.uuid4().hex[:8]
    _start(server, "ops", thread)
    _decide_elsewhere(target, thread)
    events = server.run("ops", _message(thread))
    result = [e for _, e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["content"] for r in result] == ["user 1001 deleted"]
    assert events[-1][1]["outcome"]["type"] == "interrupt"  # the message's own request
    session = _load(target, thread)
    assert [m.content for m in session.messages if m.role == "user"] == ["go", "and now this"]
    assert effects(log, thread) == ["delete_user 1001"]
    _same_again(server, "ops", thread, events)


def test_a_message_that_cannot_run_after_the_decisions_is_refused_not_dropped(
    world: tuple[Server, str, Path],
) -> None:
    server, target, log = world
    thread = "t-" + uuid.uuid4().hex[:8]
    _start(server, "twice", thread)
    _decide_elsewhere(target, thread)
    events = server.run("twice", _message(thread))
    assert "RUN_FINISHED" not in types(events)
    error = events[-1][1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "INTERRUPTS_OPEN"
    (waiting,) = server.get(f"/threads/{thread}")["interrupts"]
    assert waiting["interrupt"]["id"] in error["message"] and "not run" in error["message"]
    session = _load(target, thread)
    assert [m.content for m in session.messages if m.role == "user"] == ["go"]
    assert effects(log, thread) == ["delete_user 1"]
    # a client that lost the stream replays it (the thread's log, or the run id again
    # without the message): the same end, never a RUN_FINISHED that lets it believe the
    # message ran (before: RUN_FINISHED {outcome: interrupt}, the message silently gone)
    logged = server.replay(thread)
    since = next(n for n, (_, e) in enumerate(logged)
                 if e["type"] == "RUN_STARTED" and e["runId"] == "r2")  # fmt: skip
    assert logged[since:] == events
    retried = {**_message(thread), "messages": _message(thread)["messages"][:1]}
    assert server.run("twice", retried) == events
    # sent again, it is refused again (the thread waits on its new interrupt), not lost
    again = server.run("twice", {**_message(thread), "runId": "r3"})
    assert again[-1][1]["code"] == "INTERRUPTS_OPEN"


def _same_again(server: Server, agent: str, thread: str, events: list[tuple[str, Any]]) -> None:
    """One AG-UI run; the thread's log and a retried runId send the very same events."""
    kinds = types(events)
    assert kinds.count("RUN_STARTED") == 1 and kinds[0] == "RUN_STARTED"
    assert kinds.count("RUN_FINISHED") == 1 and kinds[-1] == "RUN_FINISHED"
    logged = server.replay(thread)
    since = next(n for n, (_, e) in enumerate(logged)
                 if e["type"] == "RUN_STARTED" and e["runId"] == "r2")  # fmt: skip
    assert logged[since:] == events
    assert server.run(agent, _message(thread)) == events
