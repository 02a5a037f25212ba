"""Random flow graphs for hypothesis properties: blocks of activities, exclusive,
parallel and inclusive gateways and loops, nested (R11, R43/R44)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from intermission import END, FlowContext, GraphSpec, Node

Block = Any


def blocks(depth: int = 0) -> st.SearchStrategy[Block]:
    leaf = st.just(("act",))
    if depth >= 3:
        return leaf
    inner = st.deferred(lambda: blocks(depth + 1))
    return st.one_of(
        leaf,
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: ("seq", xs)),
        st.tuples(st.just("excl"), inner, inner),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ("par", xs)),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ("incl", xs)),
        inner.map(lambda b: ("loop", b)),
    )


@dataclass
class Harness:
    plan: set[tuple[str, int]] = field(default_factory=set)
    calls: dict[str, int] = field(default_factory=dict)
    work: dict[str, int] = field(default_factory=dict)
    paused: set[tuple[str, int]] = field(default_factory=set)

    def task(self, ctx: FlowContext, node: Node) -> None:
        nid = node.id
        self.calls[nid] = self.calls.get(nid, 0) + 1
        k = self.work.get(nid, 0) + 1
        if (nid, k) in self.plan and (nid, k) not in self.paused:
            self.paused.add((nid, k))
            assert ctx.session is not None
            ctx.session.pending(True, f"pause at {nid}#{k}")
            return
        self.work[nid] = k
        # order-sensitive accumulator: any reordering or repeat shows up
        ctx.put("acc", (ctx.get("acc", 7) * 31 + sum(map(ord, nid))) % 1_000_003)
        ctx.put(nid, ctx.get(nid, 0) + 1)


class Builder:
    def __init__(self, harness: Any) -> None:
        self.spec = GraphSpec("g")
        self.h = harness
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def build(self, block: Block) -> GraphSpec:
        self.spec.add_start().link_add(self.emit(block, END))
        self.spec.add_end()
        return self.spec

    def emit(self, block: Block, nxt: str) -> str:
        kind = block[0]
        spec, task = self.spec, self.h.task
        if kind == "act":
            name = self.fresh("a")
            spec.add_activity(name).task(task).link_add(nxt)
            return name
        if kind == "seq":
            first = nxt
            for sub in reversed(block[1]):
                first = self.emit(sub, first)
            return first
        if kind == "excl":
            gw, merge = self.fresh("x"), self.fresh("m")
            spec.add_activity(merge).task(task).link_add(nxt)
            yes, no = self.emit(block[1], merge), self.emit(block[2], merge)
            spec.add_exclusive(gw).task(task).link_add(
                yes, when=lambda c: c.get("acc", 7) % 2 == 0
            ).link_add(no)
            return gw
        if kind in ("par", "incl"):
            fork, join = self.fresh("f"), self.fresh("j")
            add = spec.add_parallel if kind == "par" else spec.add_inclusive
            add(join).task(task).link_add(nxt)
            firsts = [self.emit(sub, join) for sub in block[1]]
            node = add(fork).task(task)
            for i, first in enumerate(firsts):
                if kind == "incl" and i > 0:
                    node.link_add(first, when=lambda c, i=i: c.get("acc", 7) % (i + 2) != 0)
                else:
                    node.link_add(first)
            return fork
        if kind == "loop":
            loop = self.fresh("l")
            spec.add_loop(loop, over="items").task(task).link_add(nxt)
            spec.get_node(loop).body(self.emit(block[1], loop))
            return loop
        raise AssertionError(kind)


