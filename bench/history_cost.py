"""2b. What checkpoint history costs (R43, R44, R50): pause and resume with it on and
off, bytes per checkpoint (the first two, and the steady state of 60 request cycles),
forks."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import (
    Pool,
    approval_spec,
    claimed_resume,
    median_rounds,
    per_op,
    row,
    verdict,
    warm_wal,
)


def bench_history(rounds: int, tmp: Path) -> None:
    """What checkpoint history costs (R43/R44): pause and claimed resume of the 3-node
    graph with history on (the default) against the same with ``max_checkpoints=0``, in
    one store, interleaved; bytes a request-end checkpoint adds to the snapshot; a fork of
    a paused session against a load of it."""
    print("\n2b. checkpoint history and forks, 3-node approval graph, SQLite (WAL, FULL)")
    from intermission import FlowEngine, InMemoryAgentSession
    from intermission.stores import SQLiteStore

    graph = approval_spec()
    engine = FlowEngine()
    store = SQLiteStore(tmp / "history.db")
    counter = iter(range(10**9))
    per = 40
    pools = {"on": Pool("hon", counter, per), "off": Pool("hoff", counter, per)}

    def pause_with(checkpoints: int) -> Callable[[str], None]:
        def pause(sid: str) -> None:
            s = InMemoryAgentSession(sid, max_checkpoints=checkpoints)
            engine.eval(graph, s.context)
            store.save(s)

        return pause

    resume = claimed_resume(store, engine, graph)

    pauses = {
        "on": pools["on"].pause(pause_with(50)),
        "off": pools["off"].pause(pause_with(0)),
    }
    warm_wal(pauses["on"], tmp / "history.db-wal")
    med_pause = median_rounds(pauses, rounds)
    for _ in range(rounds + 2):
        pauses["on"]()
        pauses["off"]()
    resumes = {name: pool.resume(resume) for name, pool in pools.items()}
    med_resume = median_rounds(resumes, rounds, warmup=0)
    for what, med in (("pause → parked", med_pause), ("resume → done (claimed)", med_resume)):
        ratio = med["on"] / med["off"]
        row(f"{what}: history on vs off (max_checkpoints=0)", f"{med['on'] * 1e3:.3f} ms",
            f"{ratio:.2f}× off ({med['off'] * 1e3:.3f} ms)",
            verdict(ratio <= 1.15) + " (≤ 1.15×)")  # fmt: skip

    # bytes: the snapshot with and without history, at the pause (1 checkpoint) and done (2)
    sizes = {}
    for checkpoints in (50, 0):
        s = InMemoryAgentSession("bytes", max_checkpoints=checkpoints)
        engine.eval(graph, s.context)
        paused = len(s.to_json().encode())
        s.context.put("decision", "APPROVE")
        engine.eval(graph, s.context)
        sizes[checkpoints] = (paused, len(s.to_json().encode()), len(s.history))
    per_checkpoint = (sizes[50][1] - sizes[0][1]) / sizes[50][2]
    row("bytes per request-end checkpoint (snapshot JSON)", f"{per_checkpoint:,.0f} B",
        f"paused {sizes[50][0]:,} B vs {sizes[0][0]:,} B off; done {sizes[50][1]:,} B vs "
        f"{sizes[0][1]:,} B off", verdict(per_checkpoint <= 300) + " (≤ 300 B)")  # fmt: skip

    # fork of a paused session against a load of it
    ids = [f"fk{next(counter)}" for _ in range(per)]
    for sid in ids:
        pause_with(50)(sid)
    loaded = [store.load(sid) for sid in ids]
    forks = iter(range(10**9))

    def load_batch() -> float:
        return per_op(ids, store.load)

    def fork_batch() -> float:
        t = time.perf_counter()
        for s in loaded:
            s.fork(f"{s.session_id}.f{next(forks)}")
        return (time.perf_counter() - t) / len(loaded)

    med = median_rounds({"load": load_batch, "fork": fork_batch}, rounds)
    ratio = med["fork"] / med["load"]
    row("fork a paused session (session.fork)", f"{med['fork'] * 1e3:.3f} ms",
        f"{ratio:.2f}× a load ({med['load'] * 1e3:.3f} ms)",
        verdict(ratio <= 2) + " (≤ 2×)")  # fmt: skip
    store.close()


def _ops_cycles(session: Any, cycles: int, prompt: Callable[[int], str]) -> None:
    from intermission import HITL
    from intermission.examples import build_ops_agent

    agent = build_ops_agent()
    for i in range(cycles):
        agent.prompt(prompt(i)).session(session).call()
        HITL.approve_all(session, reviewer="bench")
        agent.prompt().session(session).call()


def _change_cycles(session: Any, cycles: int, prompt: Callable[[int], str]) -> None:
    from intermission import decide_graph
    from intermission.examples import build_change_graph

    team = build_change_graph(lambda cid: f"applied {cid}")
    for i in range(cycles):
        team.prompt(prompt(i)).session(session).call()
        if session.status == "pending":
            decide_graph(session, "APPROVE", reviewer="bench")
            team.prompt().session(session).call()


def _cycles(
    sessions: dict[int, Any], checkpoints: int, run: Any, prompt: Any, n: int
) -> Callable[[], float]:
    """A sample: ``n`` cycles on a new session (kept in ``sessions``); seconds per cycle."""
    from intermission import InMemoryAgentSession

    def sample() -> float:
        s = sessions[checkpoints] = InMemoryAgentSession("steady", max_checkpoints=checkpoints)
        t = time.perf_counter()
        run(s, n, prompt)
        return (time.perf_counter() - t) / n

    return sample


def bench_history_steady(cycles: int) -> None:
    """History in the steady state (R50): ``cycles`` request cycles (prompt, approve,
    resume) of the ops agent and of the change graph on one session, whose messages are
    bounded (``max_messages=50``: the oldest go as new ones come) and whose history keeps
    the last 50 checkpoints. Bytes per checkpoint: the snapshot with history on minus the
    same session's with it off, over the checkpoints kept; and the time of the cycles with
    history on against off."""
    print(f"\n2d. history in the steady state: {cycles} request cycles on one session")

    workloads = {
        "ops agent": (_ops_cycles, lambda i: f"delete user 1001 (request {i})"),
        "change graph": (_change_cycles, lambda i: f"Upgrade the order service (request {i})"),
        "ops agent, 2 KB prompts": (_ops_cycles, lambda i: f"request {i}: " + "x" * 2048),
    }
    for name, (run, prompt) in workloads.items():
        n = 50 if "2 KB" in name else cycles
        sessions: dict[int, Any] = {}
        samplers = {k: _cycles(sessions, c, run, prompt, n) for k, c in (("on", 50), ("off", 0))}
        med = median_rounds(samplers, rounds=5, warmup=1)
        on, off = (len(sessions[c].to_json().encode()) for c in (50, 0))
        kept = len(sessions[50].history)
        ratio = on / off
        row(f"{n} cycles, {name}: bytes per checkpoint", f"{(on - off) / kept:,.0f} B",
            f"snapshot {on:,} B with history vs {off:,} B off: {ratio:.2f}×; a cycle "
            f"{med['on'] * 1e3:.2f} ms vs {med['off'] * 1e3:.2f} ms off",
            verdict(ratio <= 1.5) + " (≤ 1.5×)")  # fmt: skip
