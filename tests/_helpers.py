"""Graphs and helpers shared by tests."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest

from intermission import END, FlowContext, GraphSpec, Node, tool

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_DSN = os.environ.get("INTERMISSION_PG_DSN")


def need(ok: bool, what: str) -> None:
    """Skip locally, fail under CI=true, when something a test needs is missing."""
    if ok:
        return
    if IN_CI:
        pytest.fail(f"{what}; CI=true: a missing dependency fails the run")
    pytest.skip(f"{what} (CI=true would fail instead)")


def need_module(name: str, what: str) -> None:
    """``need`` for an importable module (an optional extra or test tool)."""
    try:
        importlib.import_module(name)
    except ImportError:
        need(False, what)


def pg_dsn() -> str:
    """The test database, or a skip locally / a failure under CI=true."""
    need(bool(PG_DSN), "PostgreSQL tests need INTERMISSION_PG_DSN (.ci/postgres.sh sets one up)")
    assert PG_DSN is not None
    return PG_DSN


def fresh_pg(**kw: Any) -> Any:
    """A PostgresStore on an emptied test database."""
    from intermission.stores.postgres import PostgresStore

    store = PostgresStore(pg_dsn(), **kw)
    with store._tx() as run:
        run("DELETE FROM im_ledger")
        run("DELETE FROM im_events")
        run("DELETE FROM im_sessions")
        run("DELETE FROM im_audit")
    return store

TRANSFERS: list[tuple[str, int]] = []
"""Every call of :func:`transfer` (tests clear it first)."""


@tool
def transfer(account: str, amount: int) -> str:
    """Move money."""
    TRANSFERS.append((account, amount))
    return f"sent {amount} to {account}"


def approval_task(ctx: FlowContext, node: Node) -> None:
    """The seed's approval gate: only checks the decision, records the request, pends."""
    ctx.put("calls.approval", ctx.get("calls.approval", 0) + 1)
    if ctx.get("approval.decision") is None:
        ctx.put("approval.request", ctx.get("change.proposal"))
        assert ctx.session is not None
        ctx.session.pending(True, "change plan awaits human review")


def change_graph(counter: dict[str, int] | None = None) -> GraphSpec:
    """proposal → approval → approval_route → executor | reject_finish (no models)."""
    counts: dict[str, Any] = counter if counter is not None else {}

    def proposal(ctx: FlowContext, node: Node) -> None:
        counts["proposal"] = counts.get("proposal", 0) + 1
        ctx.put("change.proposal", "upgrade order-service + migrate db")

    def executor(ctx: FlowContext, node: Node) -> None:
        counts["executor"] = counts.get("executor", 0) + 1
        assert ctx.session is not None
        ctx.put("change.result", ctx.session.once("change-001/execute", lambda: "executed"))

    def reject_finish(ctx: FlowContext, node: Node) -> None:
        ctx.put("change.result", "change rejected: " + str(ctx.get("approval.reason")))

    spec = GraphSpec("change")
    spec.add_start().link_add("proposal")
    spec.add_activity("proposal").task(proposal).link_add("approval")
    spec.add_activity("approval").title("Human review").task(approval_task).link_add(
        "approval_route"
    )
    spec.add_exclusive("approval_route").link_add(
        "executor", when=lambda ctx: ctx.get("approval.decision") == "APPROVE"
    ).link_add("reject_finish")
    spec.add_activity("executor").task(executor).link_add(END)
    spec.add_activity("reject_finish").task(reject_finish).link_add(END)
    spec.add_end()
    return spec


def linear(n: int, name: str = "line") -> GraphSpec:
    """start → n0 → … → n{n-1} → end, each node adds 1 to ``count``."""
    spec = GraphSpec(name)
    spec.add_start().link_add("n0")
    for i in range(n):
        spec.add_activity(f"n{i}").task(
            lambda ctx, node: ctx.put("count", ctx.get("count", 0) + 1)
        ).link_add(f"n{i + 1}" if i + 1 < n else END)
    spec.add_end()
    return spec


def json_paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (the value itself first): where a test plants things."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += json_paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += json_paths(v, (*prefix, i))
    return out


def paused_change(
    effect_log: list[str] | None = None, *, checkpoints: str = "request"
) -> tuple[Any, Any, list[str]]:
    """The change graph paused at its approval on session ``change-001``: ``(team, session,
    log)``, where the effect appends each applied change id to ``log``."""
    from intermission import InMemoryAgentSession
    from intermission.examples import build_change_graph

    log = effect_log if effect_log is not None else []

    def effect(change_id: str) -> str:
        log.append(change_id)
        return f"applied {change_id}"

    team = build_change_graph(effect, checkpoints=checkpoints)
    s = InMemoryAgentSession.of("change-001")
    team.prompt("Upgrade").session(s).call()
    return team, s, log
