"""Graphs and helpers shared by tests."""

from __future__ import annotations

import importlib
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from intermission import END, FlowContext, GraphSpec, Node, tool

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_DSN = os.environ.get("INTERMISSION_PG_DSN")


END_LINES: list[str] = []
"""Lines tests leave for the end of the run (totals): tests/conftest.py prints them; under
``pytest -n`` each worker hands its own to the controller, which prints them all."""


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


XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
"""``gw0``, ``gw1``… in a worker of ``pytest -n N`` (children it starts inherit it), else ``""``."""


def pg_dsn() -> str:
    """The test database, or a skip locally / a failure under CI=true. Under ``pytest -n``
    each worker has its own database (``<name>_gw0``…, created on first use), so workers
    never empty or lock each other's tables."""
    need(bool(PG_DSN), "PostgreSQL tests need INTERMISSION_PG_DSN (.ci/postgres.sh sets one up)")
    assert PG_DSN is not None
    dsn = _worker_database(PG_DSN, XDIST_WORKER) if XDIST_WORKER else PG_DSN
    _reset_pg_schema(dsn)
    return dsn


_PG_RESET = False
_PG_WORKER_DSN: dict[str, str] = {}


def _worker_database(base: str, worker: str) -> str:
    """The DSN of ``base``'s database suffixed ``_<worker>``, created (from ``template0``, which
    nobody is connected to) when missing; the base DSN's role needs CREATEDB."""
    if base in _PG_WORKER_DSN:
        return _PG_WORKER_DSN[base]
    import psycopg

    url = urlsplit(base)  # kept a URL: the CLI and servers take postgresql://… as a store
    assert url.scheme.startswith("postgres"), "INTERMISSION_PG_DSN is a postgresql:// URL"
    name = f"{url.path.lstrip('/') or url.username}_{worker}"
    with psycopg.connect(base, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            try:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
            except psycopg.errors.DuplicateDatabase:
                pass  # a child process of this worker made it first
    _PG_WORKER_DSN[base] = urlunsplit(url._replace(path="/" + name))
    return _PG_WORKER_DSN[base]


def _reset_pg_schema(dsn: str) -> None:
    """Drop whatever an earlier run left in the test database (once per process): a database
    migrated by a newer intermission would otherwise refuse every store this one opens."""
    global _PG_RESET
    if _PG_RESET:
        return
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
    _PG_RESET = True


def fresh_pg(**kw: Any) -> Any:
    """A PostgresStore on an emptied test database."""
    from intermission.stores.postgres import PostgresStore

    store = PostgresStore(pg_dsn(), **kw)
    with store._tx() as run:
        run("DELETE FROM im_outbox")
        run("DELETE FROM im_outbox_told")
        run("DELETE FROM im_settings")
        run("DELETE FROM im_ledger")
        run("DELETE FROM im_events")
        run("DELETE FROM im_sessions")
        run("DELETE FROM im_audit")
    if kw.get("outbox") is None:  # (read before the settings above were emptied)
        store.outbox.enabled = False
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


PG_SECRET = "S3cr3t-x9Q"
"""The password of :func:`pg_role_url`'s role: distinctive, so finding it in an output
means it leaked (the test database's own password, ``intermission``, is everywhere)."""


def pg_role_url() -> str:
    """A URL to the test database as a role of its own whose password is ``PG_SECRET``,
    working in a schema it owns (emptied first). Needs a role that may create roles."""
    import psycopg

    base = urlsplit(pg_dsn())
    role = f"im_sec_user{XDIST_WORKER}"
    with psycopg.connect(urlunsplit(base), autocommit=True) as conn:
        try:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PG_SECRET}'")
        except psycopg.errors.InsufficientPrivilege:
            need(False, "this test needs a PostgreSQL role that may CREATE ROLE")
        conn.execute(f"ALTER ROLE {role} PASSWORD '{PG_SECRET}'")
        conn.execute(f"DROP SCHEMA IF EXISTS {role} CASCADE")
        conn.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")  # ($user is on its path)
    host = base.hostname or "127.0.0.1"
    netloc = f"{role}:{PG_SECRET}@{host}" + (f":{base.port}" if base.port else "")
    return urlunsplit(base._replace(netloc=netloc))


def cli_identity(name: str = "carol", roles: tuple[str, ...] = ("clerk",)) -> str:
    """An identity file (made once per process) that signs this process's OS user in as
    ``name`` with ``roles`` (R60: a CLI decides as the person its OS login is mapped to,
    authenticated; unmapped, it is an asserted name a policy that counts people refuses)."""
    import json
    import tempfile

    from intermission.principals import os_login

    key = (name, roles)
    if key not in _IDENTITIES:
        from pathlib import Path

        folder = Path(tempfile.mkdtemp(prefix="im-identity-"))
        path = folder / "identity.json"
        path.write_text(json.dumps({
            "principals": {name: {"roles": list(roles)}}, "os_users": {os_login(): name},
        }))  # fmt: skip
        os.chmod(path, 0o644)
        _IDENTITIES[key] = str(path)
    return _IDENTITIES[key]


_IDENTITIES: dict[tuple[str, tuple[str, ...]], str] = {}
