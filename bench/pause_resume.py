"""2. Pause → parked and resume → done of the 3-node approval graph on SQLite (WAL,
FULL): intermission against one committed write (the floor) and LangGraph's SqliteSaver;
the store's SQL alone; a resume with a long event log."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import (
    Pool,
    approval_spec,
    claimed_resume,
    median_rounds,
    row,
    verdict,
    warm_wal,
)


def bench_pause_resume(rounds: int, tmp: Path) -> None:
    print("\n2. pause → parked and resume → done, 3-node approval graph, SQLite (WAL, FULL)")
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import SQLiteStore

    graph = approval_spec()
    engine = FlowEngine()
    store = SQLiteStore(tmp / "im.db")
    floor = sqlite3.connect(tmp / "floor.db", isolation_level=None)
    floor.execute("PRAGMA journal_mode=WAL")
    floor.execute("PRAGMA synchronous=FULL")
    floor.execute("CREATE TABLE s (id TEXT PRIMARY KEY, status TEXT, next TEXT, state TEXT)")
    floor.execute("CREATE INDEX s_status ON s (status)")
    counter = iter(range(10**9))
    per = 40

    floors, mine = Pool("f", counter, per), Pool("i", counter, per)

    def floor_pause_one(sid: str) -> None:
        state = {"a": "done", "b": None, "c": None, "x": "payload", "y": "more"}
        floor.execute("BEGIN")
        floor.execute("INSERT INTO s VALUES (?, 'pending', 'gate', ?)", (sid, json.dumps(state)))
        floor.execute("COMMIT")

    def floor_resume_one(sid: str) -> None:
        found = floor.execute("SELECT state FROM s WHERE id = ?", (sid,)).fetchone()
        state = json.loads(found[0])
        state["b"] = "APPROVE"
        state["c"] = "done"
        floor.execute("BEGIN")
        floor.execute(
            "UPDATE s SET status = 'done', state = ? WHERE id = ?", (json.dumps(state), sid)
        )
        floor.execute("COMMIT")

    def im_pause_one(sid: str) -> None:
        s = InMemoryAgentSession.of(sid)
        engine.eval(graph, s.context)
        store.save(s)

    im_resume_claimed_one = claimed_resume(store, engine, graph)

    def im_resume_cas_one(sid: str) -> None:
        s = store.load(sid)
        s.context.put("decision", "APPROVE")
        engine.eval(graph, s.context)
        store.save(s)

    floor_pause, floor_resume = floors.pause(floor_pause_one), floors.resume(floor_resume_one)
    im_pause = mine.pause(im_pause_one)
    im_resume_claimed = mine.resume(im_resume_claimed_one)
    im_resume_cas = mine.resume(im_resume_cas_one)
    sql_pause, sql_resume = _sql_alone(store, engine, graph, Pool("q", counter, per))
    systems: dict[str, Callable[[], float]] = {
        "floor pause": floor_pause,
        "intermission pause": im_pause,
        "sql pause": sql_pause,
    }
    try:
        from typing import TypedDict

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END as LG_END
        from langgraph.graph import START as LG_START
        from langgraph.graph import StateGraph
        from langgraph.types import Command, interrupt

        class S(TypedDict, total=False):
            a: str
            b: str
            c: str

        g = StateGraph(S)
        g.add_node("a", lambda s: {"a": "done"})
        g.add_node("b", lambda s: {"b": interrupt({"ask": "approve?"})})
        g.add_node("c", lambda s: {"c": "done"})
        g.add_edge(LG_START, "a")
        g.add_edge("a", "b")
        g.add_edge("b", "c")
        g.add_edge("c", LG_END)
        conn = sqlite3.connect(tmp / "lg.db", check_same_thread=False)
        saver = SqliteSaver(conn)
        lg = g.compile(checkpointer=saver)

        peers_pool = Pool("l", counter, per)
        lg_pause = peers_pool.pause(lambda sid: lg.invoke({}, {"configurable": {"thread_id": sid}}))
        lg_resume = peers_pool.resume(
            lambda sid: lg.invoke(Command(resume="APPROVE"), {"configurable": {"thread_id": sid}})
        )
        peer_pause: Callable[[], float] | None = lg_pause
    except ImportError as exc:
        print("   langgraph sqlite not installed:", exc)
        peer_pause = lg_resume = None  # type: ignore[assignment]
    # LangGraph's checkpoints write many times what the others do, and the disk is still
    # busy with them when the next batch runs: it is compared in a group of its own so
    # that its writes do not blur the intermission/floor ratio
    # both databases reach steady state first (see warm_wal), or the ratio depends on
    # which one's log is still growing
    warm_wal(floor_pause, tmp / "floor.db-wal")
    warm_wal(im_pause, tmp / "im.db-wal")
    pauses = median_rounds(systems, rounds)
    peers = {"floor pause": floor_pause, "intermission pause": im_pause}
    if peer_pause is not None:
        peer_pauses = median_rounds({**peers, "langgraph pause": peer_pause}, rounds)
    # every resume consumes paused sessions made above: refill first
    for _ in range(rounds + 2):
        for make in (floor_pause, floor_pause, im_pause, im_pause, im_pause, sql_pause):
            make()
        if peer_pause is not None:
            peer_pause()
    resumes_sys: dict[str, Callable[[], float]] = {
        "floor resume": floor_resume,
        "intermission resume (claimed, exactly-once)": im_resume_claimed,
        "intermission resume (compare-and-set only)": im_resume_cas,
        "sql resume": sql_resume,
    }
    resumes = median_rounds(resumes_sys, rounds, warmup=0)
    if lg_resume is not None:
        peer_resumes = median_rounds(
            {"floor resume": floor_resume, "intermission resume": im_resume_claimed,
             "langgraph resume": lg_resume},
            rounds, warmup=0,
        )  # fmt: skip
    fp, fr = pauses["floor pause"], resumes["floor resume"]
    row("pause → parked: floor (1 committed write)", f"{fp * 1e3:.3f} ms")
    ip = pauses["intermission pause"]
    row("pause → parked: intermission", f"{ip * 1e3:.3f} ms", f"{ip / fp:.2f}× the floor",
        verdict(ip / fp <= 1.5) + " (≤ 1.5×)")  # fmt: skip  (issue 42's target)
    sp = pauses["sql pause"]
    row("pause → parked: intermission's SQL alone (row encoded beforehand)",
        f"{sp * 1e3:.3f} ms", f"{sp / fp:.2f}× the floor")  # fmt: skip
    if peer_pause is not None:
        lp, pf, pi = (peer_pauses[k] for k in ("langgraph pause", "floor pause",
                                               "intermission pause"))  # fmt: skip
        row("pause → parked: langgraph SqliteSaver", f"{lp * 1e3:.3f} ms",
            f"{lp / pf:.1f}× the floor; intermission {lp / pi:.1f}× faster")  # fmt: skip
    row("resume → done: floor (1 committed write)", f"{fr * 1e3:.3f} ms")
    for key in (
        "intermission resume (claimed, exactly-once)",
        "intermission resume (compare-and-set only)",
    ):
        v = resumes[key]
        row(f"resume → done: {key[13:]}", f"{v * 1e3:.3f} ms", f"{v / fr:.2f}× the floor",
            verdict(v / fr <= 2) + " (≤ 2×)")  # fmt: skip  (issue 42's target)
    sr = resumes["sql resume"]
    row("resume → done: intermission's SQL alone (claim, read, save)", f"{sr * 1e3:.3f} ms",
        f"{sr / fr:.2f}× the floor")  # fmt: skip
    if lg_resume is not None:
        lr, rf, ri = (peer_resumes[k] for k in ("langgraph resume", "floor resume",
                                                "intermission resume"))  # fmt: skip
        row("resume → done: langgraph SqliteSaver", f"{lr * 1e3:.3f} ms",
            f"{lr / rf:.1f}× the floor; intermission (claimed) {lr / ri:.1f}× faster")  # fmt: skip
    bench_long_log(rounds, tmp, store_factory=SQLiteStore)
    store.close()
    floor.close()


def _sql_alone(
    store: Any, engine: Any, graph: Any, pool: Pool
) -> tuple[Callable[[], float], Callable[[], float]]:
    """The store's own statements for a pause and a claimed resume, with every row encoded
    beforehand: what the SQL costs against the floor, without the Python around it."""
    from intermission import InMemoryAgentSession
    from intermission.stores.base import row_of

    paused = InMemoryAgentSession.of("probe")
    engine.eval(graph, paused.context)
    p, (_, p_events, p_n, _) = row_of(paused), paused.events.unsaved_chunk()
    paused.context.put("decision", "APPROVE")
    paused.events.mark_stored(len(paused.events), 1)
    engine.eval(graph, paused.context)
    r, (_, r_events, r_n, _) = row_of(paused), paused.events.unsaved_chunk()

    def pause(sid: str) -> None:
        with store._tx() as run:
            run(
                "INSERT INTO im_sessions (status, agent, reason, tasks, deadline_ms, request, "
                "snapshot, updated_ms, events, events_n, id, version) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (p.status, p.agent, p.reason, p.tasks_json, p.deadline_ms, p.request_json,
                 p.state_json, time.time() * 1e3, p_events, p_n, sid),
            )  # fmt: skip

    def resume(sid: str) -> None:
        with store._tx("lease") as run:
            run(
                "UPDATE im_sessions SET claimed_by = 'x', claim_until = ? WHERE id = ? "
                "AND claimed_by IS NULL RETURNING snapshot, version, events, events_n",
                (time.time() * 1e3 + 6e4, sid),
            ).fetchone()
            run("SELECT n, events FROM im_events WHERE session_id = ?", (sid,)).fetchall()
            run("SELECT key, entry FROM im_ledger WHERE session_id = ?", (sid,)).fetchall()
        with store._tx() as run:
            run(
                "UPDATE im_sessions SET status = ?, agent = ?, reason = ?, tasks = ?, "
                "deadline_ms = ?, request = ?, snapshot = ?, updated_ms = ?, "
                "version = version + 1, claimed_by = NULL, claim_until = NULL "
                "WHERE id = ? AND version = 1 AND claimed_by = 'x'",
                (r.status, r.agent, r.reason, r.tasks_json, r.deadline_ms, r.request_json,
                 r.state_json, time.time() * 1e3, sid),
            )  # fmt: skip
            run(
                "INSERT INTO im_events (session_id, part, n, events) VALUES (?, 1, ?, ?)",
                (sid, r_n, r_events),
            )

    return pool.pause(pause), pool.resume(resume)


def bench_long_log(rounds: int, tmp: Path, store_factory: Any) -> None:
    """Resume cost against the length of the session's event log: saves append only the
    events they add and loads leave the old ones unparsed, so a long history costs little."""
    from intermission import FlowEngine, InMemoryAgentSession, NodeStartEvent
    from intermission.core.events_log import RunScope

    graph = approval_spec()
    engine = FlowEngine()
    store = store_factory(tmp / "long.db")
    counter = iter(range(10**9))
    pools = {n: Pool(f"h{n}-", counter, 20) for n in (0, 1000)}

    def paused_with(history: int) -> Callable[[str], None]:
        def pause(sid: str) -> None:
            s = InMemoryAgentSession(sid, max_events=5000)
            scope = RunScope("earlier", "approve3", s)
            for i in range(history):  # earlier requests' events
                scope.emit(NodeStartEvent, graph_id="g", node_id=f"n{i % 50}", node_kind="activity")
            engine.eval(graph, s.context)
            store.save(s)

        return pause

    resume = claimed_resume(store, engine, graph)

    makers = {n: pool.pause(paused_with(n)) for n, pool in pools.items()}
    for _ in range(rounds + 2):
        makers[0]()
        makers[1000]()
    resumes = {"short": pools[0].resume(resume), "long": pools[1000].resume(resume)}
    med = median_rounds(resumes, rounds, warmup=0)
    ratio = med["long"] / med["short"]
    row("resume → done with 1,000 earlier events in the log", f"{med['long'] * 1e3:.3f} ms",
        f"{ratio:.2f}× the same resume with none ({med['short'] * 1e3:.3f} ms)")  # fmt: skip
    store.close()
