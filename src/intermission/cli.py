"""``python -m intermission``: run the demo, list pending sessions, show one, decide and
resume, sweep deadlines, print or check a session's audit trail — against a SQLite file or
a PostgreSQL URL. Errors are one line and exit code 2. Every field printed passes through
``visible``: a reason taken from model output cannot rewrite the approver's terminal (R42).

Who decides is the operating system's user running the command (by its effective uid, at
this host; its groups are its roles): ``--reviewer`` adds a display name, never another
identity."""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ._clock import SYSTEM_CLOCK
from ._text import visible as _v
from .decisions import HITLDecision
from .errors import IntermissionError, _utc
from .hitl import HITL, decide_graph
from .hitl.graph import binding_deadline
from .principals import Actor, os_principal
from .stores.base import SessionStore
from .stores.decide import DEFAULT_WAIT_S, DecisionOutcome, decide_and_resume
from .stores.open import open_store

__all__ = ["main"]

DEFAULT_STORE = "intermission-demo.sqlite"


def _agents(spec: str | None) -> dict[str, Callable[[], Any]]:
    """Agent factories by name: the examples, or ``module:attr`` returning such a dict."""
    if spec:
        module, _, attr = spec.partition(":")
        found: dict[str, Callable[[], Any]] = getattr(importlib.import_module(module), attr)
        return found
    from .examples import AGENTS

    return AGENTS


def _agent_for(args: argparse.Namespace, name: str | None) -> Any:
    factories = _agents(args.agents)
    if name not in factories:
        raise IntermissionError(
            f"no agent named {name!r} is known here (known: {', '.join(sorted(factories))}); "
            "pass --agents module:DICT_OF_FACTORIES"
        )
    return factories[name]()


def cli_actor(display: str | None = None) -> Actor:
    """Who runs this command, as a decision records it: the OS user (``user@host``, its
    groups as roles), via the CLI, authenticated by the operating system; ``display``: a
    name the person typed (``--reviewer``), kept as a note only."""
    me = os_principal()
    shown = display.strip() if display else None
    return Actor(
        name=me.name, roles=sorted(me.roles), via="cli", authenticated=True,
        display=shown if shown and shown != me.name else None,
    )  # fmt: skip


def cmd_demo(args: argparse.Namespace, store: SessionStore) -> None:
    from .core.session import InMemoryAgentSession
    from .examples import build_change_graph

    session = InMemoryAgentSession.of(args.session)
    build_change_graph().prompt("Upgrade the order service and migrate the database").session(
        session
    ).principal(cli_actor()).call()
    store.save(session)
    sid, target = _v(session.session_id), _v(args.store)
    print(f"session {sid} is pending: {_v(session.pending_reason)}")
    print(f"request: {_v(session.context.get('approval.request'))}")
    print("continue with one of:")
    print(f"  python -m intermission approve {sid} --reviewer alice --store {target}")
    print(
        f"  python -m intermission reject {sid} --reason 'not now' "
        f"--reviewer alice --store {target}"
    )


def cmd_pending(args: argparse.Namespace, store: SessionStore) -> None:
    items = store.pending(limit=args.limit, agent=args.agent)
    if not items:
        print("no pending sessions")
        return
    print(f"{'SESSION':<24} {'AGENT':<16} {'TASKS':>5}  REASON")
    now = SYSTEM_CLOCK.now_ms()  # stored sessions are judged by the wall clock
    for item in items:
        agent, reason = _v(item.agent or "-"), _v(item.reason or "")
        late = item.deadline_ms is not None and now >= item.deadline_ms
        reason += " [expired]" if late else ""
        reason += f" [{_v(item.progress)}]" if item.progress else ""
        print(f"{_v(item.session_id):<24} {agent:<16} {len(item.tasks):>5}  {reason}")


def cmd_show(args: argparse.Namespace, store: SessionStore) -> None:
    s = store.load(args.session_id)
    print(f"session:  {_v(s.session_id)}")
    print(f"status:   {s.status}   agent: {_v(s.agent)}   version: {s.store_version}")
    if s.is_pending:
        print(f"reason:   {_v(s.pending_reason)}")
    if s.context.get("approval.request") is not None:
        print(f"request:  {_v(s.context.get('approval.request'))}")
    if s.requester is not None:
        print(f"asked by: {_v(s.requester.name)} ({s.requester.via or 'api'})")
    now = s.clock.now_ms()
    expired = {t.call_uuid for t in HITL.expired_tasks(s, now)}
    for task in HITL.pending_tasks(s):
        call = f"{task.tool_name}({json.dumps(task.args, ensure_ascii=False)})"
        late = " [expired: the next resume rejects it]" if task.call_uuid in expired else ""
        print(f"task:     {_v(task.call_uuid)} {_v(call)} {_v(task.reason or '')}{late}")
        progress = HITL.progress(s, task.call_uuid, now)
        if progress is not None:
            print(f"needs:    {_v(progress.text)}")
    deadline = binding_deadline(s)
    if not s.hitl.tasks and s.is_pending:
        progress = HITL.progress(s, now_ms=now)
        if progress is not None and s.context.get(progress.target) is None:
            print(f"needs:    {_v(progress.text)}")
        if deadline is not None:
            late = " [expired: the next resume rejects it]" if now >= deadline else ""
            print(f"deadline: {_utc(deadline)}{late}")
    for key, entry in sorted(s.ledger.items()):
        print(f"effect:   {_v(key)} {entry.status}")
    for line in ("result", "content"):
        value = s.context.get(f"change.{line}")
        if value is not None:
            print(f"{line}:   {_v(value)}")


def _decide(args: argparse.Namespace, store: SessionStore, approve: bool) -> None:
    # The decision is checked on a read first (a conflicting or late one exits 2 having
    # claimed nothing), then recorded, saved and applied under one claim, waiting up to
    # --wait seconds while another resumer holds it (R39): a winning decision is never
    # left recorded but unapplied. A decision someone else recorded first stands.
    batch: list[str] | None = None
    agents: dict[str | None, Any] = {}

    def agent_for(name: str | None) -> Any:  # one instance decides and resumes (R49)
        if name not in agents:
            agents[name] = _agent_for(args, name)
        return agents[name]

    me = cli_actor(args.reviewer)  # the OS user decides; --reviewer is a display name

    def decide(s: Any) -> None:
        nonlocal batch
        if batch is None:  # the calls as first read: a later, new batch is not ours
            batch = [t.call_uuid for t in s.hitl.tasks]
        if batch:
            decision = HITLDecision.approve() if approve else HITLDecision.reject(args.reason)
            if args.comment:
                decision = decision.comment(args.comment)
            HITL.submit_all(s, dict.fromkeys(batch, decision), agent=agent_for(s.agent))
        else:
            decide_graph(
                s,
                "APPROVE" if approve else "REJECT",
                reason=args.reason,
                comment=args.comment,
            )

    _applied(decide_and_resume(
        store, args.session_id, decide, agent_for, wait_s=args.wait, principal=me,
    ))  # fmt: skip


def cmd_resume(args: argparse.Namespace, store: SessionStore) -> None:
    """Resume with the decisions already recorded; a task past its deadline is rejected
    (``system:deadline``)."""
    _applied(decide_and_resume(
        store, args.session_id, lambda s: None, lambda name: _agent_for(args, name),
        wait_s=args.wait,
    ))  # fmt: skip


def _applied(outcome: DecisionOutcome) -> None:
    s = outcome.session
    state = "pending: " + (s.pending_reason or "") if s.is_pending else s.status
    if outcome.waiting is not None:
        print(f"session {_v(s.session_id)} {_v(state)}: {_v(outcome.describe())}")
        return
    if outcome.applied_elsewhere:
        print(f"session {_v(s.session_id)} {_v(state)}: {_v(outcome.describe())}")
        return
    print(f"session {_v(s.session_id)} {_v(state)}")
    if outcome.response.content:
        print(_v(outcome.response.content, keep_newlines=True))


def cmd_sweep(args: argparse.Namespace, store: SessionStore) -> None:
    """Record the warnings, escalations and expiries that fell due; with ``--every``, again
    every that many seconds until ^C."""
    import time

    from .stores.sweep import sweep_deadlines

    if args.every is not None and not 0 < args.every <= 86_400:
        raise IntermissionError("--every is a number of seconds from 0 to 86400 (not 0)")
    while True:
        swept = sweep_deadlines(store, limit=args.limit)
        if swept or args.every is None:
            ids = ", ".join(_v(i) for i in swept)
            print(f"swept {len(swept)} session(s)" + (f": {ids}" if swept else ""), flush=True)
        if args.every is None:
            return
        time.sleep(args.every)


def cmd_serve(args: argparse.Namespace, store: SessionStore) -> None:
    """The AG-UI server and reviewer console (extra ``agui``) on this store, until ^C; the
    deadline sweeper runs beside it."""
    from .agui import agui_app, serve
    from .stores.sweep import DeadlineSweeper

    auth = None
    if args.auth:
        from .agui.auth import load_auth

        auth = load_auth(args.auth)
    print(f"serving AG-UI on http://{args.host}:{args.port}/ (store {_v(args.store)})", flush=True)
    app = agui_app(_agents(args.agents), store, token=args.token, auth=auth,
                   hosts=[args.host], origins=args.allow_origin or ())  # fmt: skip
    sweeper = DeadlineSweeper(store, args.sweep_every).start() if args.sweep_every else None
    try:
        serve(app, args.host, args.port)
    finally:
        if sweeper is not None:
            sweeper.stop()


_CSV_FIELDS = (
    "seq", "at", "action", "actor", "roles", "via", "authenticated", "target", "reason",
    "detail", "prev", "hash",
)  # fmt: skip


def cmd_audit(args: argparse.Namespace, store: SessionStore) -> int:
    """Print a session's audit records (JSON lines or CSV), or check their chain."""
    sid = args.session_id
    if args.verify:
        result = store.verify_audit(sid)
        print(str(result) if result else f"session {_v(sid)}: {_v(result)}")
        return 0 if result else 1
    records = store.audit(sid)
    if not records:
        print(f"no audit records for session {_v(sid)}", file=sys.stderr)
    if args.format == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(_CSV_FIELDS)
        for r in records:
            at = _dt.datetime.fromtimestamp(r.at_ms / 1000, _dt.timezone.utc)
            row: list[Any] = [
                r.seq, at.isoformat(timespec="milliseconds"), r.action, r.actor,
                ";".join(r.roles), r.via, r.authenticated, r.target, r.reason,
                json.dumps(r.detail, sort_keys=True, ensure_ascii=False), r.prev, r.hash,
            ]  # fmt: skip
            out.writerow([_cell(v) for v in row])
        return 0
    for r in records:
        # every record as stored (with its hash): anyone can re-check the chain from this
        line = json.dumps(r.model_dump(mode="json"), sort_keys=True, ensure_ascii=True)
        print(line.replace("\x7f", "\\u007f"))
    return 0


def _cell(value: Any) -> str:
    """A CSV cell that neither a terminal nor a spreadsheet interprets: control
    characters escaped, and text a spreadsheet would run as a formula quoted."""
    text = "" if value is None else _v(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _existing(target: str) -> None:
    """Refuse a SQLite path with no file behind it (a reading command creates none)."""
    if target.startswith(("postgresql://", "postgres://")) or target == "memory:":
        return
    path = target.removeprefix("sqlite:///")
    if not os.path.exists(path):
        raise IntermissionError(
            f"no store at {path!r}: audit reads an existing store and creates none; "
            "pass the file or postgresql:// URL the sessions are stored in (--store)"
        )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(prog="intermission", description=__doc__)
    parser.add_argument("--agents", help="module:DICT of agent factories by name")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--store", default=DEFAULT_STORE, help="SQLite file or postgresql:// URL")
        return p

    demo = add("demo", "run the change-approval example to its pause and save it")
    demo.add_argument("--session", default="change-001")
    pending = add("pending", "list pending sessions, newest first")
    pending.add_argument("--agent")
    pending.add_argument("--limit", type=int, default=50)
    add("show", "show one session").add_argument("session_id")

    def wait(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--wait", type=float, default=DEFAULT_WAIT_S,
            help="seconds to wait while someone else resumes the session (default 30)",
        )  # fmt: skip

    shown_as = "a display name recorded with the decision (who decides is your OS user)"
    approve = add("approve", "approve and resume")
    wait(approve)
    approve.add_argument("session_id")
    approve.add_argument("--reviewer", help=shown_as)
    approve.add_argument("--comment")
    approve.set_defaults(reason=None)
    reject = add("reject", "reject and resume")
    wait(reject)
    reject.add_argument("session_id")
    reject.add_argument("--reason", required=True)
    reject.add_argument("--reviewer", help=shown_as)
    reject.add_argument("--comment")
    resume = add("resume", "resume with the decisions recorded (expired tasks are rejected)")
    wait(resume)
    resume.add_argument("session_id")
    audit = add("audit", "print a session's audit trail, or check it (--verify)")
    audit.add_argument("session_id")
    audit.add_argument(
        "--verify", action="store_true",
        help="check the hash chain: exit 1 naming the first broken record, else print "
        "the number of records and the head hash (keep it elsewhere to catch a rewrite)",
    )  # fmt: skip
    audit.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    serve = add("serve", "serve the agents over AG-UI, with a reviewer console at /")
    serve.add_argument("--agents", default=argparse.SUPPRESS, help="module:DICT of factories")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--token", help="require Authorization: Bearer TOKEN on every route")
    serve.add_argument(
        "--auth", metavar="FILE",
        help="who may call, as principals: tokens (kept as sha256 hashes) or JWT settings "
        "(a JSON or YAML file; see the README)",
    )  # fmt: skip
    serve.add_argument(
        "--sweep-every", type=float, default=5.0, metavar="S",
        help="record approval deadlines that fell due every S seconds (0: never)",
    )  # fmt: skip
    sweep = add("sweep", "record the warnings, escalations and expiries of approval deadlines")
    sweep.add_argument("--every", type=float, metavar="S", help="sweep again every S seconds")
    sweep.add_argument("--limit", type=int, default=100, help="sessions per sweep")
    serve.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="a web origin (scheme://host:port) allowed to call without a token",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace, SessionStore], int | None]] = {
        "demo": cmd_demo,
        "pending": cmd_pending,
        "show": cmd_show,
        "approve": lambda a, s: _decide(a, s, True),
        "reject": lambda a, s: _decide(a, s, False),
        "resume": cmd_resume,
        "serve": cmd_serve,
        "sweep": cmd_sweep,
        "audit": cmd_audit,
    }
    try:
        if args.command == "audit":
            _existing(args.store)
        store = open_store(args.store)
    except IntermissionError as exc:
        print(f"error: {_v(exc)}", file=sys.stderr)
        return 2
    try:
        code = commands[args.command](args, store)
    except IntermissionError as exc:
        print(f"error: {_v(exc)}", file=sys.stderr)
        return 2
    finally:
        store.close()
    return code or 0
