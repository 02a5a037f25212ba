"""The command line's agent versions (R62): ``versions`` (the paused sessions per agent
name and version, and the oldest pause) and ``pending --version ops@2``'s filter. Read
only, as the other views."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._text import visible as _v
from .errors import UsageError, _utc
from .stores.base import SessionStore
from .stores.listings import VersionCount, version_filter

__all__ = ["add_versions_parser", "check_version_option", "cmd_versions", "pending_filter"]


def add_versions_parser(add: Any, pending: argparse.ArgumentParser) -> None:
    """The ``versions`` command and ``pending --version`` (``add``: build_parser's
    command maker)."""
    pending.add_argument(
        "--version", dest="agent_version", metavar="VERSION",
        help="only the sessions paused under this agent version: AGENT@VERSION (say "
        "ops@2, as versions lists it) or VERSION (of any agent, or of --agent)",
    )  # fmt: skip
    versions = add(
        "versions",
        "list the paused sessions per agent name and version, with the oldest pause (UTC)",
    )
    versions.add_argument("--json", action="store_true", help="a JSON list of objects")


def check_version_option(args: argparse.Namespace) -> None:
    """Refuse a malformed ``--version`` before any store is opened (one line, exit 2)."""
    if getattr(args, "agent_version", None) is not None:
        pending_filter(args)


def pending_filter(args: argparse.Namespace) -> dict[str, Any]:
    """``store.pending``'s keyword arguments for ``--agent`` and ``--version``."""
    given = getattr(args, "agent_version", None)
    try:
        agent, version = version_filter(given, args.agent)
    except UsageError as exc:
        # (said with the options' names: its messages start "version …", name "agent")
        said = str(exc).replace(", and agent is", ", and --agent is")
        raise UsageError(f"--{said}") from None
    # (a version only when asked: a store of another program may not take one)
    return {"agent": agent} if version is None else {"agent": agent, "version": version}


def _versions_of(store: SessionStore) -> list[VersionCount]:
    versions = getattr(store, "versions", None)
    if versions is None:
        kind = type(store).__name__
        raise UsageError(f"the store ({kind}) does not list agent versions")
    found: list[VersionCount] = versions()
    return found


def cmd_versions(args: argparse.Namespace, store: SessionStore) -> None:
    counts = _versions_of(store)
    if args.json:
        print(json.dumps([_json_of(c) for c in counts], ensure_ascii=True, indent=2))
        return
    if not counts:
        print("no paused sessions")
        return
    rows = [(_v(c.agent or "?"), _v(c.version or "-"), str(c.count), _utc(c.oldest_ms))
            for c in counts]  # fmt: skip
    agent_w = max(16, *(len(r[0]) for r in rows))
    version_w = max(12, *(len(r[1]) for r in rows))
    print(f"{'AGENT':<{agent_w}} {'VERSION':<{version_w}} {'PAUSED':>6}  OLDEST PAUSE")
    for agent, version, n, oldest in rows:
        print(f"{agent:<{agent_w}} {version:<{version_w}} {n:>6}  {oldest}")


def _json_of(count: VersionCount) -> dict[str, Any]:
    """One entry of ``versions --json`` (``version`` null: paused before versions were
    recorded; ``agent`` null: no agent ran it)."""
    return {
        "agent": count.agent,
        "version": count.version,
        "label": count.label,
        "paused": count.count,
        "oldest_pause": _iso(count.oldest_ms),
    }


def _iso(ms: float) -> str:
    """Epoch ms as ISO 8601 in UTC, to the millisecond."""
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
