"""The flow engine: advances graphs node by node, pauses and resumes exactly (R7a–R10).

How a run moves: every branch is a *token* naming the node it stands on; the token stack
is persisted in ``ctx.trace``. Entering a node records it before its task runs (R8). After
the task, ``stop`` (or a session pending) leaves every token where it is, so the next
``eval`` runs the pending node's task again and nothing before it; ``interrupt`` parks only
the current token. Joins count arrivals in the trace, so resuming inside parallel or
inclusive branches is exact (R9) — the Java original keeps one cursor per graph instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .._check import shown
from .._clock import Clock
from .._ids import RANDOM_IDS, IdFactory
from .._sync import run_sync
from ..errors import FlowRuntimeError, NothingToResumeError, SnapshotSchemaError, UsageError
from ..events import NodeEndEvent, NodeStartEvent
from . import listeners
from .context import CURRENT_NODE, GRAPH_RUNNING, FlowContext
from .events_log import RunScope
from .graph import Graph, Node
from .history import take_checkpoint as _record
from .listeners import LISTENERS
from .session_status import SessionStatus
from .spec import GraphSpec
from .state import GraphRun

__all__ = ["FlowEngine", "FlowInterceptor", "FlowResult", "FlowStatus", "check_positions"]

FlowStatus = Literal["done", "stopped", "parked", "budget"]
"""done: reached the end · stopped: ``stop()``/pending ended the run · parked: some branch
was interrupted and waits for the next eval · budget: the step budget ran out (R10)."""


@dataclass(frozen=True, slots=True)
class FlowResult:
    """What one ``eval`` did."""

    status: FlowStatus
    steps: int
    positions: tuple[str, ...]

    @property
    def is_done(self) -> bool:
        """True when the graph finished."""
        return self.status == "done"


class FlowInterceptor(Protocol):
    """Hooks around every node of a flow graph (all optional).

    ``ctx.stop()`` in ``on_node_start`` means the node's task does not run and the node
    runs on resume."""

    def on_node_start(self, ctx: FlowContext, node: Node) -> None:
        """Called after a node is entered, before its task."""

    def on_node_end(self, ctx: FlowContext, node: Node) -> None:
        """Called after a node's task finished."""


_COMPOSITE = frozenset({"agent", "subgraph"})


class _Budget:
    __slots__ = ("left", "used")

    def __init__(self, steps: int | None) -> None:
        self.left = steps
        self.used = 0


class FlowEngine:
    """Runs graphs on a :class:`FlowContext` (the seed's ``flowEngine.eval(graph, ctx)``).

    Calling :meth:`eval` again on the same context resumes where it stopped.
    """

    def __init__(
        self,
        interceptors: Sequence[FlowInterceptor] = (),
        *,
        clock: Clock | None = None,
        ids: IdFactory | None = None,
        checkpoints: Literal["request", "node"] = "request",
    ) -> None:
        if isinstance(interceptors, (str, bytes)) or not isinstance(interceptors, Iterable):
            raise UsageError(f"interceptors is a list, not {type(interceptors).__name__}")
        self.interceptors = tuple(interceptors)
        if clock is not None and not callable(getattr(clock, "now_ms", None)):
            raise UsageError(f"clock has a now_ms() method, not {shown(clock)}")
        if ids is not None and not callable(ids):
            raise UsageError(f"ids is an id factory (a function), not {shown(ids)}")
        if checkpoints not in ("request", "node"):
            raise UsageError(f"checkpoints is 'request' or 'node', not {shown(checkpoints)}")
        self.clock = clock
        self.ids = ids or RANDOM_IDS
        self.node_checkpoints = checkpoints == "node"
        """Take a checkpoint at every node entered (R43); request ends always take one."""

    def eval(
        self, graph: GraphSpec | Graph, ctx: FlowContext, steps: int | None = None
    ) -> FlowResult:
        """Run (or resume) ``graph`` on ``ctx``; ``steps`` limits how many nodes to enter.

        Sync tasks run without any event loop; a task that returns an awaitable is awaited
        on this thread's loop (or a worker thread inside a running loop, e.g. a notebook).
        """
        steps_gen = self._steps(graph, ctx, steps, None)
        value: Any = None
        error: BaseException | None = None
        while True:
            done, out = _advance(steps_gen, value, error)
            if done:
                return out  # type: ignore[no-any-return]
            try:
                value, error = run_sync(_await(out)), None
            except BaseException as exc:  # handed back to the task that awaited it
                value, error = None, exc

    async def eval_async(
        self,
        graph: GraphSpec | Graph,
        ctx: FlowContext,
        steps: int | None = None,
        *,
        scope: RunScope | None = None,
    ) -> FlowResult:
        """Async :meth:`eval`. ``scope`` (set by agents) stamps node events."""
        steps_gen = self._steps(graph, ctx, steps, scope)
        value: Any = None
        error: BaseException | None = None
        while True:
            done, out = _advance(steps_gen, value, error)
            if done:
                return out  # type: ignore[no-any-return]
            try:
                value, error = await out, None
            except BaseException as exc:
                value, error = None, exc

    def _steps(
        self, graph: GraphSpec | Graph, ctx: FlowContext, steps: int | None, scope: RunScope | None
    ) -> Generator[Any, Any, FlowResult]:
        """The run as a generator that yields only what must be awaited (one core for the
        sync and the async entry points)."""
        if not isinstance(graph, (GraphSpec, Graph)) or not isinstance(ctx, FlowContext):
            bad = graph if not isinstance(graph, (GraphSpec, Graph)) else ctx
            raise UsageError(
                "eval runs a GraphSpec or Graph on a FlowContext (session.context); got "
                f"a {type(bad).__name__}"
            )
        if steps is not None and (
            not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps <= 10**9
        ):
            raise UsageError(f"steps is a whole number from 0 to 1e9 (or None), not {shown(steps)}")
        g = graph.build() if isinstance(graph, GraphSpec) else graph
        session = ctx.session
        done = ctx.trace.graphs.get(g.id)
        if done is not None and done.started and not done.tokens:
            # R4: never a silent empty run; checked before anything changes
            raise NothingToResumeError(
                f"graph {g.id!r} already ran to its end on this context: nothing to resume; "
                "clear its positions (ctx.trace.clear()) to run it again",
                session_id=session.session_id if session is not None else None,
            )
        standalone = scope is None
        if scope is None and session is not None:
            scope = RunScope(self.ids("run"), g.id, session, self.clock)
            if session.agent is None:
                session.agent = g.id
        # A new request clears pending at its start (R3); the race with a concurrent
        # pending() is documented there (R5).
        if done is not None:
            _check_positions(g, done, f"flow.graphs.{g.id}")
        if session is not None:
            session.pending(False, None)
            session.status = "running"
        else:
            ctx._set_stopped(False)
        run = ctx.trace.run_for(g.id)
        budget = _Budget(steps)
        # while a graph runs on ``ctx``, an effect a node starts is linked to the graph
        # approval that let the run past it (R60, see hitl.unknown_outcome.graph_link)
        ctx.attrs[GRAPH_RUNNING] = ctx.attrs.get(GRAPH_RUNNING, 0) + 1
        try:
            status = yield from self._run(g, run, ctx, budget, scope)
        except BaseException as exc:
            if session is not None:
                # a cancel (a stream's reader left) leaves the run resumable where it stood
                stopped: SessionStatus = "pending" if ctx.is_stopped else "paused"
                session.status = "failed" if isinstance(exc, Exception) else stopped
                if standalone:
                    _record(session, failing=True)
                    if LISTENERS:
                        listeners.ended(session, exc)
            raise
        finally:
            ctx.attrs[GRAPH_RUNNING] -= 1
        if session is not None:
            session.status = (
                "pending" if ctx.is_stopped else "done" if status == "done" else "paused"
            )
            if standalone:  # (an agent's request records its own end)
                _record(session, failing=False)
                if LISTENERS:
                    listeners.ended(session, None)
        return FlowResult(status, budget.used, tuple(run.tokens))

    def _run(
        self, g: Graph, run: GraphRun, ctx: FlowContext, budget: _Budget, scope: RunScope | None
    ) -> Generator[Any, Any, FlowStatus]:
        if not run.started:
            run.started = True
            run.ended = False
            run.tokens = [g.start]
        stack = run.tokens
        parked: list[str] = []
        nodes = g.nodes
        visited = run.visited
        interceptors = self.interceptors
        status: FlowStatus | None = None
        while stack:
            if ctx._stopped:
                status = "stopped"
                break
            if budget.left is not None:
                if budget.left <= 0:
                    status = "budget"
                    break
                budget.left -= 1
            budget.used += 1
            if self.node_checkpoints and ctx.session is not None:
                # the state about to enter the node: a fork from here runs it once
                _record(ctx.session, failing=False)
            nid = stack[-1]
            node = nodes[nid]
            run.last = nid
            ctx.attrs[CURRENT_NODE] = nid  # (open_approval notes where it was asked, R60)
            visited[nid] = visited.get(nid, 0) + 1
            if node.is_join and not self._arrive(node, run):
                stack.pop()  # this branch waits at the join
                continue
            started = 0.0
            if scope is not None:
                started = scope.node_event(NodeStartEvent, g.id, nid, node.kind)
                if scope.pacer is not None:
                    try:  # a stream's reader that stops here: the node's task never runs
                        yield scope.pace()
                    except BaseException:
                        if parked:
                            run.tokens = parked + stack
                        raise
            for ic in interceptors:
                hook = getattr(ic, "on_node_start", None)
                if hook is not None:
                    hook(ctx, node)
            if ctx._stopped:
                status = "stopped"
                break
            child_status: FlowStatus | None = None
            try:
                task = node.task
                if node.kind in _COMPOSITE:
                    child_status = yield from self._execute(node, run, ctx, budget, scope)
                elif task is not None and (node.when is None or node.when(ctx)):
                    # the common case inline: a coroutine per node would cost more than the step
                    result: Any = task(ctx, node)
                    if result is not None and inspect.isawaitable(result):
                        yield result
            except BaseException:
                run.failed = nid
                raise
            if child_status is not None:
                if child_status == "stopped":
                    status = "stopped"
                    break
                if child_status == "budget":
                    status = "budget"
                    break
                parked.append(stack.pop())  # a parked child parks this branch
                continue
            if ctx._stopped:
                status = "stopped"
                break
            if ctx._interrupted:
                ctx._interrupted = False
                parked.append(stack.pop())
                continue
            for ic in interceptors:
                hook = getattr(ic, "on_node_end", None)
                if hook is not None:
                    hook(ctx, node)
            if ctx._stopped:
                status = "stopped"
                break
            route = node.fixed_route
            if route is None:
                try:
                    route = tuple((t, nid + ">" + t) for t in self._route(node, run, ctx))
                except BaseException:
                    run.failed = nid
                    raise
            if scope is not None:
                scope.node_event(NodeEndEvent, g.id, nid, node.kind, started)
            stack.pop()
            if run.failed == nid:
                run.failed = None
            if node.kind == "end":
                run.ended = True
            elif node.is_join:
                run.joins.pop(nid, None)
            taken = run.taken
            for target, key in reversed(route):
                stack.append(target)
                taken[key] = taken.get(key, 0) + 1
            if scope is not None and scope.pacer is not None:
                try:
                    yield scope.pace()
                except BaseException:
                    if parked:  # stopped here: branches parked earlier keep their place
                        run.tokens = parked + stack
                    raise
        if status is None:
            status = "parked" if parked else "done"
            if not parked:
                run.ended = True
        run.tokens = parked + stack if parked else stack
        return status

    @staticmethod
    def _arrive(node: Node, run: GraphRun) -> bool:
        """Count an arrival at a join; True when the join releases its token."""
        arrived = run.joins.get(node.id, 0)
        if arrived == -1:  # released before a pause: the join node itself is re-running
            return True
        if node.kind == "inclusive" and run.inclusive:
            expected = run.inclusive[-1]
        else:
            expected = node.incoming
        arrived += 1
        if arrived < expected:
            run.joins[node.id] = arrived
            return False
        run.joins[node.id] = -1
        if node.kind == "inclusive" and run.inclusive:
            run.inclusive.pop()
        return True

    def _execute(
        self, node: Node, run: GraphRun, ctx: FlowContext, budget: _Budget, scope: RunScope | None
    ) -> Generator[Any, Any, FlowStatus | None]:
        """Run the node's work; returns a child status only when a subgraph did not finish."""
        task = node.task
        if task is not None and (node.when is None or node.when(ctx)):
            result: Any = task(ctx, node)
            if result is not None and inspect.isawaitable(result):
                yield result
            if ctx._stopped or ctx._interrupted:
                return None
        if node.kind == "agent" and node.agent is not None:
            yield node.agent.run_as_member(ctx, node)
        elif node.kind == "subgraph" and node.subgraph is not None:
            child = run.children.get(node.id)
            if child is None:
                child = run.children[node.id] = GraphRun()
            status = yield from self._run(node.subgraph, child, ctx, budget, scope)
            if status != "done":
                return status
            del run.children[node.id]
        return None

    @staticmethod
    def _route(node: Node, run: GraphRun, ctx: FlowContext) -> list[str]:
        kind = node.kind
        if kind == "end":
            return []
        if kind == "exclusive":
            default: str | None = None
            for link in node.links:
                if link.when is None:
                    if default is None:
                        default = link.target
                elif link.when(ctx):
                    return [link.target]
            if default is None:
                raise FlowRuntimeError(
                    f"exclusive gateway {node.id!r}: no link matched and there is no "
                    "default link; add a link without when=",
                    node_id=node.id,
                )
            return [default]
        if kind == "parallel":
            return [link.target for link in node.links]
        if kind == "loop":
            over = node.loop_over
            items = ctx.get(over) if isinstance(over, str) else over(ctx) if over else None
            index = run.loops.get(node.id, 0)
            if items is not None and index < len(items):
                ctx.put(node.loop_item, items[index])
                run.loops[node.id] = index + 1
                assert node.loop_body is not None
                return [node.loop_body]
            run.loops.pop(node.id, None)
            return [node.links[0].target]
        targets = [link.target for link in node.links if link.when is None or link.when(ctx)]
        if kind == "inclusive":
            if not targets:
                raise FlowRuntimeError(
                    f"inclusive gateway {node.id!r}: no link matched; add a link without when=",
                    node_id=node.id,
                )
            if len(node.links) > 1:
                run.inclusive.append(len(targets))
        return targets


def check_positions(graph: Graph, ctx: FlowContext) -> None:
    """Raise SnapshotSchemaError unless the positions ``ctx`` recorded for ``graph`` name
    its nodes (callers that change the session before running check first)."""
    run = ctx.trace.graphs.get(graph.id)
    if run is not None:
        _check_positions(graph, run, f"flow.graphs.{graph.id}")


def _check_positions(g: Graph, run: GraphRun, path: str) -> None:
    """Recorded positions must name nodes of the graph that runs them (a snapshot from
    another graph, or edited by hand): a typed error before anything changes (R42)."""
    for where, names in (("tokens", run.tokens), ("joins", run.joins), ("loops", run.loops)):
        for name in names:
            if name not in g.nodes:
                raise SnapshotSchemaError(
                    f"{name!r} is not a node of graph {g.id!r}", path=f"{path}.{where}"
                )
    for name, child in run.children.items():
        node = g.nodes.get(name)
        if node is None or node.subgraph is None:
            raise SnapshotSchemaError(
                f"{name!r} is not a subgraph node of graph {g.id!r}", path=f"{path}.children"
            )
        _check_positions(node.subgraph, child, f"{path}.children.{name}")


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _advance(
    gen: Generator[Any, Any, Any], value: Any, error: BaseException | None
) -> tuple[bool, Any]:
    """Resume the run generator: (True, result) when it finished, else (False, awaitable)."""
    try:
        return False, gen.throw(error) if error is not None else gen.send(value)
    except StopIteration as stop:
        return True, stop.value
