"""``python -m intermission migrate ID --to 2``: move a paused session to another served
version of its agent on purpose (R62) — with both versions served nothing migrates unless
asked. The migration runs under the store's claim, as the CLI's principal (the OS user as
``--auth`` maps it, on the audit trail as ``agent.migrated``), and is saved as the claim
ends; anything refused (a version not served, one that does not migrate from the
session's, an upcaster that raises) is one line, exit 2, with the stored session as it
was."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable

from ._text import visible as _v
from .audit import noted
from .errors import UsageError
from .stores.base import SessionStore

__all__ = ["add_migrate_parser", "cmd_migrate"]


def add_migrate_parser(add: Callable[..., argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The ``migrate`` command, made with the parser's own ``add`` (its --store, --auth,
    --agents)."""
    p = add(
        "migrate",
        "migrate a paused session to another version of its agent (one that declares "
        "migrates_from its version); a call whose arguments it rewrites waits for a new "
        "approval",
        runs_agents=True,
    )
    p.add_argument("session_id", metavar="SESSION", help="the session's id (see pending)")
    p.add_argument(
        "--to", required=True, metavar="VERSION",
        help="the version to move it to (served by --agents; say 2)",
    )  # fmt: skip
    return p


def cmd_migrate(args: argparse.Namespace, store: SessionStore) -> None:
    """Migrate session ``args.session_id`` to version ``args.to`` under its claim, as the
    CLI's principal; print what changed."""
    from .cli import _table, cli_actor
    from .hitl.deciding import deciding_as

    table = _table(args)
    to: str = args.to
    read = store.load(args.session_id)  # (refusals that need no claim come first)
    name = read.agent
    if name is None:
        raise UsageError(
            f"session {read.session_id!r} has run no agent yet: there is nothing to migrate"
        )
    if to not in table.versions(name):  # (refused before claiming: the same words)
        table.migrate(read, to=to)
    if read.agent_version == to:
        on = f"{_v(name)}@{_v(to)}"
        print(f"session {_v(read.session_id)} is on {on} already; nothing was changed")
        return
    me = cli_actor(args=args)
    with store.resume(args.session_id) as s:  # saved as the block ends; released on a raise
        before = s.agent_version
        seen = len(noted(s))
        with deciding_as(me):
            table.migrate(s, to=to)
        rewritten = [e for e in noted(s)[seen:] if e.action == "task.rewritten"]
    tools = [str(e.detail.get("tool", e.target)) for e in rewritten]
    said = f"migrated session {_v(s.session_id)}: {_v(name)} {_v(before)} → {_v(to)}"
    if len(tools) == 1:
        said += f" (the call {_v(tools[0])}'s approval starts over)"
    elif tools:
        said += f" (the calls {_v(', '.join(tools))}: their approvals start over)"
    print(said)
    if s.is_pending:
        sid = _v(shlex.quote(s.session_id))
        print(f"continue with: python -m intermission approve {sid} (or reject, or resume)")

