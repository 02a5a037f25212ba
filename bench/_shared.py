"""What every measurement shares: interleaved medians, timers, the table rows, and the
3-node approval graph most of them pause and resume."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROWS: list[tuple[str, str, str, str]] = []  # (measurement, value, ratio, target verdict)


def median_rounds(
    systems: dict[str, Callable[[], float]], rounds: int, warmup: int = 2
) -> dict[str, float]:
    """Run each system's sample function once per round in a shuffled order; medians."""
    samples: dict[str, list[float]] = {name: [] for name in systems}
    names = list(systems)
    for _ in range(warmup):
        for name in names:
            systems[name]()
    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            samples[name].append(systems[name]())
    return {name: statistics.median(v) for name, v in samples.items()}


def timed(fn: Callable[[], Any], repeat: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat


def per_op(ids: list[str], op: Callable[[str], Any]) -> float:
    """Seconds per call of ``op`` over ``ids``."""
    t = time.perf_counter()
    for sid in ids:
        op(sid)
    return (time.perf_counter() - t) / len(ids)


def warm_wal(batch: Callable[[], float], wal: Path, most: int = 40) -> int:
    """Run ``batch`` until the write-ahead log at ``wal`` stops growing (it has reached its
    checkpoint size and is reused from the start): a commit that extends the file costs
    a journal commit more in the filesystem than one that overwrites, so a database
    measured before that point looks slower than it does in steady state. Returns how
    many batches it took."""
    sizes: list[int] = []
    for n in range(1, most + 1):
        batch()
        sizes.append(wal.stat().st_size if wal.exists() else 0)
        if len(sizes) >= 3 and sizes[-1] == sizes[-2] == sizes[-3] > 0:
            return n
    return most


class Pool:
    """One system's paused sessions: its pause batches add ids, its resume batches consume
    them; each batch returns the time per session."""

    def __init__(self, prefix: str, counter: Iterator[int], per: int) -> None:
        self.prefix, self.counter, self.per = prefix, counter, per
        self.ids: list[str] = []

    def pause(self, op: Callable[[str], Any]) -> Callable[[], float]:
        def batch() -> float:
            ids = [f"{self.prefix}{next(self.counter)}" for _ in range(self.per)]
            took = per_op(ids, op)
            self.ids.extend(ids)
            return took

        return batch

    def resume(self, op: Callable[[str], Any]) -> Callable[[], float]:
        def batch() -> float:
            return per_op([self.ids.pop() for _ in range(self.per)], op)

        return batch


def row(what: str, value: str, ratio: str = "", verdict: str = "") -> None:
    ROWS.append((what, value, ratio, verdict))
    print(f"  {what:<58} {value:>16}  {ratio:<40} {verdict}")


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def line_spec(n: int = 100) -> Any:
    """A linear graph of ``n`` activities, each counting itself in ``count``."""
    from intermission import END, GraphSpec

    spec = GraphSpec("line")
    spec.add_start().link_add("n0")
    for i in range(n):
        spec.add_activity(f"n{i}").task(
            lambda ctx, node: ctx.put("count", ctx.get("count", 0) + 1)
        ).link_add(f"n{i + 1}" if i + 1 < n else END)
    spec.add_end()
    return spec.build()


def approval_spec() -> Any:
    from intermission import END, GraphSpec

    def gate(ctx: Any, node: Any) -> None:
        if ctx.get("decision") is None:
            ctx.session.pending(True, "needs approval")

    spec = GraphSpec("approve3")
    spec.add_start().link_add("a")
    spec.add_activity("a").task(lambda c, n: c.put("a", "done")).link_add("gate")
    spec.add_activity("gate").task(gate).link_add("c")
    spec.add_activity("c").task(lambda c, n: c.put("c", "done")).link_add(END)
    spec.add_end()
    return spec.build()


def claimed_resume(store: Any, engine: Any, graph: Any) -> Callable[[str], None]:
    """A resume under the store's claim that approves and runs the graph to its end."""

    def resume(sid: str) -> None:
        with store.resume(sid) as s:
            s.context.put("decision", "APPROVE")
            engine.eval(graph, s.context)

    return resume
