"""``python -m intermission``: run the demo, list pending sessions, show one, decide and
resume, resolve an effect of unknown outcome, sweep deadlines, print or check a session's
audit trail, deliver notifications — against a SQLite file or a PostgreSQL URL. Errors are
one line and exit code 2. Every field printed passes through ``visible``: a reason taken
from model output cannot rewrite the approver's terminal. A command that only reads never
creates a store.

Who decides (or resolves an effect) is the operating system's user running the command (by
its effective uid), mapped by the identity file of ``--auth FILE`` (or
``$INTERMISSION_AUTH``) through its ``os_users:`` to a person with that file's roles,
authenticated. An unmapped user (or no identity file) is ``user@host``, asserted, with no
roles — roles never come from OS group names — and a policy that counts people (roles,
approvals > 1, not_requester) refuses it. ``--reviewer`` adds a display name, never another
identity."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import _check
from ._cli_agents import AgentTable, demo_only_message, load_agents
from ._cli_audit import cmd_audit
from ._cli_migrate import cmd_migrate
from ._cli_notify import cmd_notify, cmd_outbox, notifier_of
from ._cli_parser import build_parser, store_option
from ._cli_versions import check_version_option, cmd_versions
from ._cli_views import cmd_pending, cmd_show
from ._cli_worker import cmd_worker, decide_on_temporal, on_temporal
from ._json import loads
from ._secrets import mask_known, mask_process_output, mask_url, passwords_in, read_token
from ._text import visible as _v
from .decisions import HITLDecision
from .errors import (
    AgentMismatchError,
    AgentVersionError,
    EffectOutcomeUnknownError,
    IntermissionError,
    NothingToResumeError,
    SessionBusyError,
    UsageError,
)
from .hitl import HITL, decide_graph
from .identity import IdentityMap, load_identity
from .principals import Actor, os_principal
from .stores.base import SessionStore
from .stores.decide import DecisionOutcome, decide_and_resume
from .stores.effects import resolve_unknown_effect
from .stores.open import open_store

__all__ = ["build_parser", "main"]

CREATES = frozenset({"demo", "serve", "notify"})
"""Commands that may create the store they are given (the others only use one)."""


def _table(args: argparse.Namespace) -> AgentTable:
    """The agents of ``--agents`` (else the bundled examples, for the demo's sessions),
    loaded once per command."""
    table: AgentTable | None = getattr(args, "_table", None)
    if table is None:
        if args.adopt and args.agents is None:
            raise UsageError(
                "--adopt needs --agents: the bundled examples run only the demo's sessions"
            )
        table = args._table = load_agents(args.agents)
    return table


def _agent_for(args: argparse.Namespace, session: Any) -> Any:
    """The agent that runs ``session``: its own version (R62), one that migrates it, or —
    with --adopt — the newest of its name."""
    from .stores.decide import runner_for

    return runner_for(_table(args), session, adopt=args.adopt)


def identity_of(args: argparse.Namespace | None) -> IdentityMap | None:
    """The identity file of ``--auth FILE``, else of ``$INTERMISSION_AUTH`` (None without
    either), read once per command."""
    if args is not None and hasattr(args, "_identity"):
        return args._identity  # type: ignore[no-any-return]
    path = getattr(args, "auth", None) or os.environ.get("INTERMISSION_AUTH") or None
    found = load_identity(path) if path else None
    if args is not None:
        args._identity = found
    return found


def cli_actor(display: str | None = None, args: argparse.Namespace | None = None) -> Actor:
    """Who runs this command, as a decision records it, via the CLI: the person the
    identity file (``--auth FILE`` / ``$INTERMISSION_AUTH``) maps the OS user to, with that
    file's roles, authenticated; else the OS user (``user@host``, no roles), asserted.
    ``display``: a name the person typed (``--reviewer``), kept as a note only."""
    identity = identity_of(args)
    mapped = identity.os_principal() if identity is not None else None
    me = mapped or os_principal()
    shown = display.strip() if display else None
    return Actor(
        name=me.name, roles=sorted(me.roles), via="cli", authenticated=mapped is not None,
        display=shown if shown and shown != me.name else None,
    )  # fmt: skip


def cmd_demo(args: argparse.Namespace, store: SessionStore) -> None:
    from .core.session import InMemoryAgentSession
    from .examples import build_served_change_graph

    session = InMemoryAgentSession.of(args.session)
    prompt = "Upgrade the order service and migrate the database"
    build_served_change_graph().prompt(prompt).session(session).principal(
        cli_actor(args=args)
    ).call()
    store.save(session)
    # the lines below are to be pasted into a shell: quoted, whatever the id or path holds
    sid, target = _v(shlex.quote(session.session_id)), _v(store_option(args.store))
    print(f"session {_v(session.session_id)} is pending: {_v(session.pending_reason)}")
    print(f"request: {_v(session.context.get('approval.request'))}")
    print("continue with one of:")
    print(f"  python -m intermission approve {sid} --reviewer alice{target}")
    print(f"  python -m intermission reject {sid} --reason 'not now' --reviewer alice{target}")


def _decide(args: argparse.Namespace, store: SessionStore, approve: bool) -> None:
    # The decision is checked on a read first (a conflicting or late one exits 2 having
    # claimed nothing), then recorded, saved and applied under one claim, waiting up to
    # --wait seconds while another resumer holds it (R39): a winning decision is never
    # left recorded but unapplied. A decision someone else recorded first stands.
    # --call decides those calls of the batch only: the resume then pauses again on the
    # calls still undecided (and applies the batch once every call is decided).
    batch: list[str] | None = None
    only: list[str] = list(dict.fromkeys(args.call or ()))

    def agent_for(s: Any) -> Any:  # one instance decides and resumes (R49)
        return _agent_for(args, s)

    me = cli_actor(args.reviewer, args)  # the OS user decides; --reviewer is a display name
    if on_temporal(store):  # the workflow judges and applies it (one signed Update)
        decide_on_temporal(args, store, approve, me)
        return

    def decide(s: Any) -> None:
        nonlocal batch
        if batch is None:  # the calls as first read: a later, new batch is not ours
            batch = [t.call_uuid for t in s.hitl.tasks]
            if only:
                try:
                    batch = _chosen_calls(s, only)
                except UsageError as exc:  # a refused decision: on the trail, as any
                    _refused(store, s.session_id, exc, me, only, approve)
                    raise
        if batch:
            decision = HITLDecision.approve() if approve else HITLDecision.reject(args.reason)
            if args.comment:
                decision = decision.comment(args.comment)
            HITL.submit_all(s, dict.fromkeys(batch, decision), agent=agent_for(s))
        else:
            decide_graph(
                s,
                "APPROVE" if approve else "REJECT",
                reason=args.reason,
                comment=args.comment,
            )

    _applied(decide_and_resume(
        store, args.session_id, decide, _table(args), wait_s=args.wait, adopt=args.adopt,
        principal=me,
    ))  # fmt: skip


def _refused(
    store: SessionStore, sid: str, exc: Exception, me: Actor, calls: list[str], approve: bool
) -> None:
    """Write the refusal of ``me``'s decision on ``calls`` to the session's audit trail."""
    from .hitl.refusals import refusal_entry

    verdict = "approve" if approve else "reject"
    entries = [refusal_entry(exc, me, uuid, verdict) for uuid in calls]
    try:
        store.append_audit(sid, entries)
    except IntermissionError:  # the decision was refused either way: that is reported
        pass


def _chosen_calls(s: Any, only: list[str]) -> list[str]:
    """The ``--call`` ids, each a call of the session's batch that waits for a decision."""
    if not s.hitl.tasks:
        raise UsageError(
            f"session {s.session_id!r} waits for an approval of the whole run, not for tool "
            "calls: leave out --call"
        )
    open_ = {t.call_uuid for t in HITL.pending_tasks(s)}
    batch = {t.call_uuid for t in s.hitl.tasks}
    for uuid in only:
        if uuid not in open_:
            known = ", ".join(sorted(open_)) or "none"
            what = "was decided already" if uuid in batch else "is not one of its calls"
            raise UsageError(
                f"call {uuid!r} of session {s.session_id!r} {what} (calls waiting: {known}; "
                "`show` lists them)"
            )
    return only


def cmd_resume(args: argparse.Namespace, store: SessionStore) -> None:
    """Resume with the decisions already recorded; a task past its deadline is rejected
    (``system:deadline``)."""
    # (a migration or an adoption it runs is on the audit trail as the CLI's principal)
    _applied(decide_and_resume(
        store, args.session_id, lambda s: None, _table(args),
        wait_s=args.wait, adopt=args.adopt, principal=cli_actor(args=args),
    ))  # fmt: skip


def cmd_resolve(args: argparse.Namespace, store: SessionStore) -> None:
    """Record what a person found about an effect of unknown outcome (under the claim), as
    the OS user as ``--auth`` maps it (``--reviewer``: a display name); an approved
    effect is judged by its approval's policy, and forgetting it reopens that approval
    (R60)."""
    me = cli_actor(args.reviewer, args)
    if args.command == "resolve":
        try:
            result = loads(args.result, "--result")
        except ValueError as exc:
            raise UsageError(f"--result is JSON (say '{{\"id\": 7}}' or 'null'): {exc}") from None
        s = resolve_unknown_effect(store, args.session_id, args.key, result=result,
                                   reviewer=args.reviewer, via="cli", principal=me)  # fmt: skip
        what = "recorded as completed: its next run returns that result"
    else:
        s = resolve_unknown_effect(store, args.session_id, args.key, forget=True,
                                   reviewer=args.reviewer, via="cli", principal=me)  # fmt: skip
        what = "forgotten: its next run runs it again"
        if s.ledger[args.key].approval is not None:  # its approval was reopened (R60)
            what = "forgotten: its approval is open again, it runs only after a fresh decision"
    print(f"effect {_v(args.key)} of session {_v(s.session_id)} {what} ({s.status})")
    if s.status in ("pending", "paused", "failed"):
        sid, at = _v(shlex.quote(s.session_id)), _v(store_option(args.store))
        print(f"continue with: python -m intermission resume {sid}{at} "
              "(or approve / reject it, if it still waits for a decision)")  # fmt: skip


def _applied(outcome: DecisionOutcome) -> None:
    s = outcome.session
    state = "pending: " + (s.pending_reason or "") if s.is_pending else s.status
    if outcome.waiting is not None:  # a vote of a quorum: recorded, nothing resumed
        print(f"session {_v(s.session_id)} {_v(state)}: {_v(outcome.describe())}")
        return
    if outcome.applied_elsewhere:
        print(f"session {_v(s.session_id)} {_v(state)}: {_v(outcome.describe())}")
        return
    print(f"session {_v(s.session_id)} {_v(state)}")
    if outcome.response.content:
        print(_v(outcome.response.content, keep_newlines=True))
    waiting = HITL.pending_tasks(s) if s.is_pending else []
    for task in waiting:  # (a batch decided in part: the rest still waits)
        call = f"{task.tool_name}({json.dumps(task.args, ensure_ascii=False)})"
        print(f"still waiting: {_v(task.call_uuid)} {_v(call)}")


def cmd_sweep(args: argparse.Namespace, store: SessionStore) -> None:
    """Record the warnings, escalations and expiries that fell due; with ``--every``, again
    every that many seconds until ^C."""
    import time

    from .stores.sweep import sweep_deadlines

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

    table = _table(args)
    table.factories()  # (each built now: a broken one is a one-line error)
    auth = None
    identity = identity_of(args)
    if identity is not None:
        from .agui.auth import auth_of

        auth = auth_of(identity)
    token = _serve_token(args, auth is not None)
    notifier = None
    if args.notify:
        # links: the flag's URL, else the file's, else this server's own (an IPv6 address
        # in brackets; with --port 0, known once it listens: see ready)
        host = f"[{args.host}]" if ":" in args.host else args.host
        own = f"http://{host}:{args.port}" if args.port else None
        notifier = notifier_of(args, store, args.public_url, own)
    # the table itself: new threads start on the newest version, stored ones run on their
    # own (or one that migrates them), others are refused (R62: blue-green on one store)
    app = agui_app(table, store, token=token, auth=auth, hosts=[args.host],
                   origins=args.allow_origin or (), drain_s=args.drain,
                   signed_routes=_slack_routes(notifier, store, table, identity))  # fmt: skip
    if notifier is not None:  # the dispatcher runs for the app's lifespan
        from .notify import with_notifier

        app = with_notifier(app, notifier)

    def ready(url: str) -> None:  # said once the socket listens and the app started
        if notifier is not None and notifier.public_url is None:
            notifier.public_url = url.rstrip("/")
            store.outbox.set_public_url(notifier.public_url)  # type: ignore[attr-defined]
        at = _v(mask_url(args.store, whole=True))  # (a password in the URL is shown as ***)
        print(f"serving AG-UI on {url} (store {at}); the reviewer console is at {url}",
              flush=True)  # fmt: skip
        if table.bundled:
            print("serving the bundled examples for the demo's sessions only; pass --agents "
                  "module:AGENTS to serve your own agents", flush=True)  # fmt: skip

    # (every version's sessions: a sweep records what fell due and runs no agent code)
    sweeper = DeadlineSweeper(store, args.sweep_every).start() if args.sweep_every else None
    try:
        serve(app, args.host, args.port, on_ready=ready)
    finally:
        if sweeper is not None:
            sweeper.stop()


def _slack_routes(notifier: Any, store: SessionStore, table: Any,
                  identity: IdentityMap | None) -> dict[str, Any]:  # fmt: skip
    """``POST /slack/interactions`` when the notify config has an interactive Slack target
    (its clicks decide, as the identity file's ``slack_users:`` map them)."""
    slack = [t for t in getattr(notifier, "targets", ())
             if getattr(t, "interactive", False) and t.signing_secret]  # fmt: skip
    secrets = {t.name: t.signing_secret for t in slack}
    if not secrets:
        return {}
    if identity is None or not identity.slack_users:
        raise UsageError(
            "an interactive Slack target decides as the people its Slack users are: give "
            "--auth FILE (or INTERMISSION_AUTH) with slack_users: mapping Slack user ids to "
            "people"
        )
    from .slack.interactions import SlackInteractions

    origins = {t.name: t.reply_origins for t in slack}  # (a response_url goes there only)
    return {"/slack/interactions": SlackInteractions(store, table, identity, secrets,
                                                     origins=origins)}  # fmt: skip


def _serve_token(args: argparse.Namespace, has_auth: bool) -> str | None:
    """The bearer token of ``--token-file``, else ``$INTERMISSION_TOKEN`` (never argv)."""
    from ._secrets import TOKEN_ENV

    if has_auth and args.token_file is None and os.environ.get(TOKEN_ENV) is not None:
        raise UsageError(
            f"--auth and {TOKEN_ENV} both say who may call: unset {TOKEN_ENV}, or leave out "
            "--auth to serve one token"
        )
    return read_token(args.token_file)


def _said(message: str, args: argparse.Namespace) -> str:
    """A message to print with the store's password masked where a URL or a driver's quote
    holds it (the driver's own text was masked whole where it was caught)."""
    return mask_known(message, passwords_in(getattr(args, "store", "")), raw=False)


def _plain(exc: IntermissionError, args: argparse.Namespace) -> str:
    """An error as one line for a terminal: what happened and what to type, never a Python
    call to make."""
    if isinstance(exc, AgentMismatchError):
        if args.agents is None and args.command != "demo":
            return demo_only_message(exc)
        if isinstance(exc, AgentVersionError):  # (its name matches: the version does not)
            name, paused = exc.agent, exc.paused or "?"
            served = ", ".join(f"{name}@{v}" for v in exc.served) or "none"
            return (
                f"session {exc.session_id!r} paused on {name}@{paused}, which --agents "
                f"{args.agents} does not serve (served: {served}) and no served version "
                f"migrates; nothing was changed. Serve {name}@{paused} in --agents until its "
                "sessions drain, or a version that migrates from it (migrates_from)"
            )
        who = f"agent {exc.recorded!r}" if exc.recorded is not None else "another agent"
        return (
            f"session {exc.session_id!r} belongs to {who}, not to the {exc.agent!r} of "
            f"--agents {args.agents} (another name, or other tools or approval policy); "
            "nothing was changed. Pass the agents that made it, or add --adopt to hand the "
            "session over to this one on purpose"
        )
    if isinstance(exc, NothingToResumeError) and exc.status is not None:
        last = f"; its last decision was {exc.last_decision}" if exc.last_decision else ""
        return (
            f"session {exc.session_id!r} is {exc.status}: nothing waits for a decision "
            f"(someone may have resumed it already){last}; nothing was changed"
        )
    if isinstance(exc, SessionBusyError):
        wait = getattr(args, "wait", None)
        return (
            f"session {exc.session_id!r} is being resumed by someone else"
            + (f" (waited {wait:g} s)" if wait is not None else "")
            + "; nothing was changed. Run the command again once they are done"
            + (", or wait longer with --wait SECONDS" if wait is not None else "")
        )
    if isinstance(exc, EffectOutcomeUnknownError) and exc.session_id is not None:
        sid, key = shlex.quote(exc.session_id), shlex.quote(exc.key)
        return (
            f"session {exc.session_id!r} stopped at effect {exc.key!r}, which started but "
            "never recorded its end: check the external system, then record what happened "
            f"with `python -m intermission resolve {sid} {key} --result JSON` or "
            f"`python -m intermission forget {sid} {key}`"
        )
    return str(exc)


_SECONDS = (
    ("wait", "--wait", 0, 3600),
    ("drain", "--drain", 0, 86_400),
    ("every", "--every", 0.01, 86_400),
    ("sweep_every", "--sweep-every", 0, 86_400),
)
"""Each option of seconds, checked under the name the person typed (what it is passed to
names its own parameter: ``wait_s``)."""


def _check_seconds(args: argparse.Namespace) -> None:
    for dest, option, lo, hi in _SECONDS:
        _check.number(option, getattr(args, dest, None), lo, hi, optional=True)


def _open(args: argparse.Namespace) -> SessionStore:
    """The store of ``--store``; a command that only uses one never creates it."""
    if args.store == "memory:" and args.command != "serve":
        # a memory store ends with this process: a demo saved there, or a decision, is lost
        raise UsageError(
            f"--store memory: keeps nothing after this command, so {args.command} has nothing "
            "to work on: give a SQLite file (say demo.sqlite) or a postgresql:// URL"
        )
    return open_store(args.store, create=args.command in CREATES)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    if hasattr(sys.stdout, "reconfigure"):
        # a console or file that cannot hold a character (Windows' cp1252, LANG=C) shows
        # it escaped, as stderr does, rather than ending the command with a traceback
        sys.stdout.reconfigure(errors="backslashreplace")
    if argv is None:  # this process's own command line (not a test's call)
        mask_process_output()
    args = build_parser().parse_args(argv)
    if os.environ.get("INTERMISSION_OTEL"):  # traces of this process's requests
        from .otel.env import configure_from_env

        try:
            configure_from_env(one_shot=args.command != "serve")  # (its exit: ≤ 2 s)
        except IntermissionError as exc:
            print(f"error: {_v(exc)}", file=sys.stderr)
            return 2
    commands: dict[str, Callable[[argparse.Namespace, SessionStore], int | None]] = {
        "demo": cmd_demo,
        "pending": cmd_pending,
        "show": cmd_show,
        "approve": lambda a, s: _decide(a, s, True),
        "reject": lambda a, s: _decide(a, s, False),
        "resume": cmd_resume,
        "resolve": cmd_resolve,
        "forget": cmd_resolve,
        "serve": cmd_serve,
        "sweep": cmd_sweep,
        "audit": cmd_audit,
        "notify": cmd_notify,
        "outbox": cmd_outbox,
        "migrate": cmd_migrate,
        "versions": cmd_versions,
        "worker": lambda a, s: cmd_worker(a, s, _table(a)),
    }
    try:
        _check_seconds(args)
        check_version_option(args)
        identity_of(args)  # a bad identity file fails first, in one line, before any store
        if args.command in ("approve", "reject", "resume", "serve", "migrate", "worker"):
            _table(args)  # a bad --agents fails first, in one line, before any store
        store = _open(args)
    except IntermissionError as exc:
        print(f"error: {_v(_said(_plain(exc, args), args))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # ^C while the store is locked or the database is slow to answer
        return 130
    try:
        code = commands[args.command](args, store)
        sys.stdout.flush()  # (a reader that went away shows here, not as noise at exit)
    except IntermissionError as exc:
        print(f"error: {_v(_said(_plain(exc, args), args))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # ^C (serve re-raises it once its graceful stop is done)
        return 130
    except BrokenPipeError:  # `pending | head -1`: the reader stopped early, as it may
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (nothing left to flush)
        return 141  # what a shell reports for a writer that SIGPIPE ended
    finally:
        store.close()
    return code or 0
