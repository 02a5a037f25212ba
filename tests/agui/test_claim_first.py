"""Runs decide under the claim (issue 27, case 1): new prompts that race on one thread,
through two ``serve`` processes on one store (SQLite, real PostgreSQL), raw HTTP.

Per round: four clients start the same *new* thread at once, two on each of two agents;
three clients send a new message to the same *idle* thread at once. The agents' factories
take 0.3 s, so the runs reach the store together. Exactly one client pauses each thread;
the others are refused (``INTERRUPTS_OPEN``, ``WRONG_AGENT``); and — checked from the store
after the runs — every interrupt a client was handed is still open and decidable, on a
thread that belongs to the agent of the client that paused it. Then two resumes and a new
message race on the paused thread: the tool runs once (the tools' own record), every
interrupt handed out is open, and no claim is left behind.
``INTERMISSION_STRESS=N`` runs N times as many rounds."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module, pg_dsn

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from intermission.agui.interrupts import open_interrupts  # noqa: E402
from intermission.stores.open import open_store  # noqa: E402

from ._server import Server, effects  # noqa: E402

ROUNDS = 3 * int(os.environ.get("INTERMISSION_STRESS", "1"))
REFUSED = {"INTERRUPTS_OPEN", "WRONG_AGENT"}


@pytest.fixture(params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, list[Server]]]:
    if request.param == "sqlite":
        target = str(tmp_path / "s.db")
    else:
        from tests._helpers import fresh_pg

        target = pg_dsn()
        fresh_pg().close()
    log = tmp_path / "effects.log"
    servers = [Server(target, log, agents="tests.agui.agents:LAZY") for _ in range(2)]
    try:
        yield target, servers
    finally:
        for s in servers:
            s.stop()


def _at_once(calls: list[tuple[Server, str, dict[str, Any]]]) -> list[Any]:
    """POST every run at the same moment; each one's events (or the exception)."""
    results: list[Any] = [None] * len(calls)
    go = threading.Barrier(len(calls))

    def client(n: int) -> None:
        server, agent, body = calls[n]
        go.wait()
        try:
            results[n] = server.run(agent, body)
        except BaseException as exc:  # reported by the caller
            results[n] = exc

    workers = [threading.Thread(target=client, args=(n,)) for n in range(len(calls))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    return results


def _prompt(thread: str, n: int) -> dict[str, Any]:
    return {"threadId": thread, "runId": f"r{n}",
            "messages": [{"id": f"u{n}", "role": "user", "content": f"go {n}"}]}  # fmt: skip


def _handed(results: list[Any], agents: list[str]) -> dict[str, list[str]]:
    """The interrupts each agent's clients were handed; every other answer is a refusal."""
    handed: dict[str, list[str]] = {}
    for agent, events in zip(agents, results, strict=True):
        assert isinstance(events, list), events
        last = events[-1][1]
        if last["type"] == "RUN_FINISHED":
            assert last["outcome"]["type"] == "interrupt", last
            handed.setdefault(agent, []).extend(i["id"] for i in last["outcome"]["interrupts"])
        else:
            assert last["type"] == "RUN_ERROR" and last["code"] in REFUSED, last
    return handed


def _check(target: str, thread: str, handed: dict[str, list[str]]) -> None:
    """From the store: the thread is its pauser's, and what was handed out is open."""
    (agent,) = handed  # one client paused the thread
    store = open_store(target)
    try:
        session = store.load(thread)
        open_ids = {i.id for i in open_interrupts(session, session.clock.now_ms())}
    finally:
        store.close()
    assert session.agent == agent
    assert set(handed[agent]) <= open_ids, (handed, open_ids)
    assert len(handed[agent]) == 1


def _decide_while_prompting(target: str, thread: str, a: Server, b: Server) -> None:
    """Two approvals (one per server) and a new message, at once, on a paused thread."""
    owner = _load(target, thread).agent
    (iid,) = [i.id for i in open_interrupts(_load(target, thread))]
    resume = [{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]
    calls = [
        (a, owner, {"threadId": thread, "runId": "ra", "resume": resume}),
        (b, owner, {"threadId": thread, "runId": "rb", "resume": resume}),
        (a, owner, _prompt(thread, 9)),
    ]
    approved_a, approved_b, message = _at_once(calls)
    for events in (approved_a, approved_b):
        assert isinstance(events, list), events
        assert events[-1][1]["type"] == "RUN_FINISHED", events[-1]
        assert events[-1][1]["outcome"]["type"] == "success"
    assert effects(a.log, thread) == ["delete_user 5"]  # the tool's own record: once
    handed = _handed([message], [owner])
    session = _load(target, thread)
    open_ids = {i.id for i in open_interrupts(session, session.clock.now_ms())}
    assert set(handed.get(owner, [])) == open_ids  # the message ran (and paused) or was refused
    assert _holder(target, thread) is None


def _load(target: str, thread: str) -> Any:
    store = open_store(target)
    try:
        return store.load(thread)
    finally:
        store.close()


def _holder(target: str, thread: str) -> str | None:
    store = open_store(target)
    try:
        return store._holder(thread)  # type: ignore[attr-defined,no-any-return]
    finally:
        store.close()


def test_racing_new_prompts_never_hand_out_a_lost_interrupt(
    world: tuple[str, list[Server]],
) -> None:
    target, (a, b) = world
    for _ in range(ROUNDS):
        # a new thread, two agents, two clients each, through both servers
        new = "t-" + uuid.uuid4().hex[:8]
        agents = ["lazy", "lazy", "lax", "lax"]
        via = zip([a, b, b, a], agents, strict=True)
        calls = [(s, agent, _prompt(new, n)) for n, (s, agent) in enumerate(via)]
        _check(target, new, _handed(_at_once(calls), agents))
        _decide_while_prompting(target, new, a, b)

        # an idle thread (its request done), three new messages at once
        idle = "t-" + uuid.uuid4().hex[:8]
        first = a.run("lazy", _prompt(idle, 0))
        iid = first[-1][1]["outcome"]["interrupts"][0]["id"]
        resume = [{"interruptId": iid, "status": "resolved", "payload": {"approved": True}}]
        done = b.run("lazy", {"threadId": idle, "runId": "r1", "resume": resume})
        assert done[-1][1]["outcome"]["type"] == "success"
        calls = [(s, "lazy", _prompt(idle, n)) for n, s in zip((2, 3, 4), (a, b, a), strict=True)]
        _check(target, idle, _handed(_at_once(calls), ["lazy"] * 3))
