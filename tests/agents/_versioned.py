"""Two versions of one agent ``ops`` for the R62 tests (and the CLI's
``--agents tests.agents._versioned:AGENTS``): v1's tool is ``scale(replicas)``, v2's is
``scale(replicas, zone)``, and v2 migrates sessions paused on v1 by rewriting the
pending call's arguments (adding ``zone``). Every tool run is appended to :data:`RUNS`
as ``(version, args)``, and to ``$IM_EFFECT_FILE`` as a line when that is set."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from intermission import (
    HITL,
    ApprovalPolicy,
    HITLInterceptor,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)

RUNS: list[tuple[str, dict[str, Any]]] = []
"""Every run of a ``scale`` tool: (the version whose tool ran, its arguments)."""


def _ran(version: str, args: dict[str, Any]) -> None:
    RUNS.append((version, args))
    path = os.environ.get("IM_EFFECT_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps([version, args], sort_keys=True) + "\n")


def _script(args: dict[str, Any]) -> Callable[[list[Any], Any], Any]:
    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("scale", dict(args))]

    return script


def _hitl(quorum: bool) -> HITLInterceptor:
    policy = ApprovalPolicy(approvals=2) if quorum else None
    return HITLInterceptor().on_tool("scale", policy=policy)


def ops_v1(*, quorum: bool = False, label: str | None = "1") -> Any:
    """``ops`` version ``label`` (None: unlabelled, its fingerprint is its version)."""

    @tool
    def scale(replicas: int) -> str:
        """Scale the service."""
        _ran(label or "v1", {"replicas": replicas})
        return f"scaled to {replicas}"

    builder = ReActAgent.of(ScriptedModel(_script({"replicas": 3}))).name("ops").tools(scale)
    if label is not None:
        builder = builder.version(label)
    return builder.interceptor(_hitl(quorum)).build()


def to_zoned(session: Any) -> None:
    """v1 → v2: the pending ``scale`` call gets a zone (its approval starts over)."""
    for task in session.hitl.tasks:
        if task.tool_name == "scale":
            HITL.rewrite_args(session, task, {**task.args, "zone": "eu-1"})
    session.context.put("migrated.to", "2")


def ops_v2(
    *, quorum: bool = False, migrate: Callable[[Any], None] | None = to_zoned, label: str = "2"
) -> Any:
    """``ops`` version ``label``, migrating from ``1`` with ``migrate`` (None: it does not)."""

    @tool
    def scale(replicas: int, zone: str) -> str:
        """Scale the service in a zone."""
        _ran(label, {"replicas": replicas, "zone": zone})
        return f"scaled to {replicas} in {zone}"

    model = ScriptedModel(_script({"replicas": 3, "zone": "us-1"}))
    builder = ReActAgent.of(model).name("ops").version(label).tools(scale)
    if migrate is not None:
        builder = builder.migrates_from("1", migrate)
    return builder.interceptor(_hitl(quorum)).build()


def v1_only() -> Any:
    return ops_v1()


def v2_only() -> Any:
    return ops_v2()


def v2_no_migration() -> Any:
    return ops_v2(migrate=None)


def _boom(session: Any) -> None:
    session.context.put("half", "done")  # (a change the failed migration must take back)
    raise RuntimeError("upcaster exploded")


def v2_raising() -> Any:
    return ops_v2(migrate=_boom)


AGENTS: dict[str, Any] = {"ops": [v1_only, v2_only]}
"""Both versions served (oldest first)."""
V1: dict[str, Any] = {"ops": [v1_only]}
V2: dict[str, Any] = {"ops": [v2_only]}
V2_ONLY_UNMIGRATING: dict[str, Any] = {"ops": [v2_no_migration]}
V2_RAISING: dict[str, Any] = {"ops": [v2_raising]}
