"""The command line's argument parser: its commands, options and help."""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any, NoReturn

from ._secrets import TOKEN_ENV, mask_options, mask_url
from .stores.decide import DEFAULT_WAIT_S

__all__ = ["DEFAULT_STORE", "STORE_ENV", "build_parser", "store_option"]

DEFAULT_STORE = "intermission-demo.sqlite"
STORE_ENV = "INTERMISSION_STORE"
"""The store when ``--store`` is not given: a URL with a password stays out of argv."""


class _Parser(argparse.ArgumentParser):
    """argparse echoes what it could not place (``invalid choice: 'postgresql://…'``):
    store passwords and the values of options named like secrets are masked first."""

    def error(self, message: str) -> NoReturn:
        super().error(mask_options(message))


class _RefusedToken(argparse.Action):
    """``--token``: a token in argv is shown to every local user (``ps``); refused, its
    value never repeated."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        argparse.ArgumentParser.error(  # (said as is: this message holds no value to mask)
            parser,
            "--token is refused: a token on the command line is shown to every local user "
            f"(ps); give --token-file FILE (one line, chmod 600) or set {TOKEN_ENV}",
        )


def store_option(store: str) -> str:
    """`` --store STORE`` as a command to paste names it: quoted, its password masked, or
    nothing when it is ``$INTERMISSION_STORE`` (which the pasted command reads again)."""
    if store == os.environ.get(STORE_ENV):
        return ""
    return f" --store {shlex.quote(mask_url(store, whole=True))}"


DESCRIPTION = (
    "See what waits for a person, decide it and resume it: sessions paused by your agents "
    "(or by the demo) in a SQLite file or a PostgreSQL database."
)
EPILOG = (
    "Every refusal is one line on stderr and exit code 2; nothing is changed by it. "
    "`python -m intermission COMMAND --help` says more about each command."
    " Secrets stay out of the command line (every local user sees it): a store URL with a "
    "password in $INTERMISSION_STORE, serve's token in --token-file FILE or $INTERMISSION_TOKEN. "
    "Who decides is your OS user, as the identity file of --auth FILE (or $INTERMISSION_AUTH) "
    "maps it under os_users: to a person with that file's roles; OS groups grant no role, "
    "and a policy with roles, approvals > 1 or not_requester refuses an unmapped user "
    "(ApprovalPolicy(asserted_ok=True) opts out); --reviewer is a display note, never who "
    "decides."
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = _Parser(prog="intermission", description=DESCRIPTION, epilog=EPILOG)
    from ._version import __version__

    parser.add_argument("--version", action="version", version=f"intermission {__version__}")
    agents_help = (
        "module:ATTR, a dict of your agents (or functions making them) by name; without it "
        "only the demo's sessions are run, with the bundled examples"
    )
    parser.add_argument("--agents", help=agents_help)
    parser.add_argument("--adopt", action="store_true", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store_help = (
        f"a SQLite file, a postgresql:// URL or temporal://HOST:PORT/NAMESPACE (default "
        f"${STORE_ENV}, else {DEFAULT_STORE}; "
        f"a password is shown as ***: keep it out of argv with {STORE_ENV} or ~/.pgpass)"
    )
    auth_help = (
        "an identity file (default $INTERMISSION_AUTH): its os_users: maps your OS login to "
        "a person with the file's roles, who decides authenticated; without it you are "
        "user@host, asserted, with no roles (OS groups grant none), and a policy with roles, "
        "approvals > 1 or not_requester refuses you"
    )

    def add(name: str, help_text: str, *, runs_agents: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, help=help_text, description=help_text[:1].upper() + help_text[1:] + "."
        )
        p.add_argument("--store", default=DEFAULT_STORE, help=store_help)
        if name != "serve":  # (serve's --auth, below, also signs people in over HTTP)
            p.add_argument("--auth", metavar="FILE", help=auth_help)
        # (before or after the command: the command's own wins; taken, unused, elsewhere)
        p.add_argument("--agents", default=argparse.SUPPRESS,
                       help=agents_help if runs_agents else argparse.SUPPRESS)  # fmt: skip
        return p

    def adopt(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--adopt", action="store_true", default=argparse.SUPPRESS,
            help="resume a session made by another agent (another name, tools or approval "
            "policy) with the one from --agents, which takes it over",
        )  # fmt: skip

    def wait(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--wait", type=float, default=DEFAULT_WAIT_S, metavar="SECONDS",
            help="how long to wait while someone else resumes the session (default 30)",
        )  # fmt: skip

    def decision(p: argparse.ArgumentParser, verb: str) -> None:
        p.add_argument("session_id", metavar="SESSION", help="the session's id (see pending)")
        p.add_argument(
            "--call", action="append", metavar="CALL",
            help=f"{verb} only this tool call of the batch (its id, as show lists it; "
            "repeat for more); the others keep waiting",
        )  # fmt: skip
        p.add_argument(
            "--reviewer",
            help="a display name recorded with the decision (who decides is your OS user, "
            "as --auth maps it)",
        )
        p.add_argument("--comment", help="a note kept with the decision")
        wait(p)
        adopt(p)

    demo = add("demo", "run the change-approval example to its pause and save it")
    demo.add_argument(
        "--session", default="change-001", help="the new session's id (default change-001)"
    )
    pending = add("pending", "list the sessions that wait for a person, newest first")
    pending.add_argument("--agent", help="only the sessions of the agent with this name")
    pending.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    from ._cli_versions import add_versions_parser

    add_versions_parser(add, pending)
    add("show", "show one session: what it waits for, its decisions and effects").add_argument(
        "session_id", metavar="SESSION", help="the session's id"
    )
    approve = add("approve", "approve what a session waits for, and resume it", runs_agents=True)
    decision(approve, "approve")
    approve.set_defaults(reason=None)
    reject = add("reject", "reject what a session waits for, and resume it", runs_agents=True)
    decision(reject, "reject")
    reject.add_argument("--reason", required=True, help="why (required; kept and shown)")
    resume = add(
        "resume", "resume with the decisions recorded (expired tasks are rejected)",
        runs_agents=True,
    )  # fmt: skip
    resume.add_argument("session_id", metavar="SESSION", help="the session's id")
    wait(resume)
    adopt(resume)
    # (R60) an approved effect is judged by the approval that authorised it
    judged = (
        "; an approved effect (a tool call's, or a graph node's after its approval) takes "
        "a principal its approval's policy allows (roles, approvers, not the requester)"
    )
    resolve = add("resolve", "record that an effect of unknown outcome did happen" + judged)
    resolve.add_argument("session_id", metavar="SESSION", help="the session's id")
    resolve.add_argument("key", help="the effect's key (see pending or show)")
    resolve.add_argument("--result", required=True, help="its result, as JSON")
    checked = "a display name of who checked the external system (who records it is your OS user)"
    resolve.add_argument("--reviewer", help=checked)
    forget = add(
        "forget",
        "record that an effect of unknown outcome did not happen"
        + judged
        + ", and reopens that approval: it runs again only after a fresh decision",
    )
    forget.add_argument("session_id", metavar="SESSION", help="the session's id")
    forget.add_argument("key", help="the effect's key (see pending or show)")
    forget.add_argument("--reviewer", help=checked)
    from ._cli_migrate import add_migrate_parser
    from ._cli_worker import add_worker_parser

    add_worker_parser(add)

    add_migrate_parser(add)
    audit = add("audit", "print a session's audit trail, or check it (--verify)")
    audit.add_argument("session_id", metavar="SESSION", help="the session's id")
    audit.add_argument(
        "--verify", action="store_true",
        help="check the trail: the hash chain, that it ends at the head the session row "
        "keeps, and a record for every vote, decision and completed effect the session shows; "
        "exit 1 naming the first broken record and what is missing, else print the number of "
        "records and the head hash. With INTERMISSION_AUDIT_KEY (never a flag) the chain is "
        "HMAC-keyed and a rewrite with recomputed hashes is detected; without it, it is not "
        "(the output says so)",
    )  # fmt: skip
    audit.add_argument(
        "--head", action="store_true",
        help="print the session's head (hash and record count) to keep elsewhere: a later "
        "head that does not continue from it shows a rewrite",
    )  # fmt: skip
    audit.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    serve = add(
        "serve", "serve your agents over AG-UI, with a reviewer console at /", runs_agents=True
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    serve.add_argument(
        "--token-file", metavar="FILE",
        help="require Authorization: Bearer TOKEN on every route, TOKEN being FILE's one line "
        f"(chmod 600; or set {TOKEN_ENV}). A token is never given in argv: --token is refused",
    )  # fmt: skip
    serve.add_argument("--token", nargs="?", action=_RefusedToken, help=argparse.SUPPRESS)
    serve.add_argument(
        "--auth", metavar="FILE",
        help="who may call, as principals: tokens (kept as sha256 hashes) or JWT settings "
        "(a JSON or YAML file; see the docs, Approvals and policies)",
    )  # fmt: skip
    serve.add_argument(
        "--sweep-every", type=float, default=5.0, metavar="S",
        help="record approval deadlines that fell due every S seconds (0: never)",
    )  # fmt: skip
    serve.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="a web origin (scheme://host:port) allowed to call without a token",
    )
    serve.add_argument(
        "--drain", type=float, default=30.0, metavar="SECONDS",
        help="on SIGTERM/^C, how long runs in flight get to finish (default 30)",
    )  # fmt: skip
    sweep = add("sweep", "record the warnings, escalations and expiries of approval deadlines")
    sweep.add_argument("--every", type=float, metavar="S", help="sweep again every S seconds")
    sweep.add_argument("--limit", type=int, default=100, help="sessions per sweep")
    serve.add_argument("--notify", metavar="FILE", help="deliver notifications as FILE says")
    serve.add_argument("--public-url", help="where reviewers open this console (deep links)")
    notify = add("notify", "deliver the store's notifications (webhook, Slack, email)")
    notify.add_argument("--config", required=True, metavar="FILE", help="YAML or JSON config")
    notify.add_argument("--public-url", help="where reviewers open the console (deep links)")
    notify.add_argument("--once", action="store_true", help="one pass, then exit")
    outbox = add("outbox", "list the notifications in the outbox, or retry a failed one")
    outbox.add_argument("--failed", action="store_true", help="only those that gave up")
    outbox.add_argument("--retry", metavar="KEY", help="send a failed notification again")
    outbox.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    if os.environ.get(STORE_ENV):  # (each command's --store default: set_defaults updates it)
        for command in sub.choices.values():
            command.set_defaults(store=os.environ[STORE_ENV])
    return parser
