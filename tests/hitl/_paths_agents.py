"""Agents for tests/hitl/test_approvals_hold_on_every_path.py, also served to the CLI and
``serve`` as ``--agents tests.hitl._paths_agents:AGENTS``.

Every tool run and every model turn appends one line, ``<session id> <what>``, to the file
``$IM_EFFECT_FILE`` names (O_APPEND: atomic across processes): the tools' own record of
what ran, read by :func:`lines`. The session id is the tool's injected session's; a model
turn reads it from the prompt (``"... for <session id>"``), so a fork's turns count under
the id it was prompted with."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from intermission import (
    END,
    ApprovalPolicy,
    GraphSpec,
    HITLInterceptor,
    ReActAgent,
    ScriptedModel,
    TeamAgent,
    ToolCall,
    tool,
)
from intermission.core.session import AgentSession


def mark(sid: str, what: str) -> None:
    """Append ``<sid> <what>`` to ``$IM_EFFECT_FILE``."""
    path = os.environ.get("IM_EFFECT_FILE", os.devnull)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, f"{sid} {what}\n".encode())
    finally:
        os.close(fd)


def lines(path: Path, sid: str) -> list[str]:
    """What ran for session ``sid`` and its forks (``sid~…``), in order."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        who, _, what = line.partition(" ")
        if who == sid or who.startswith(sid + "~"):
            out.append(what)
    return out


def _sid(messages: list[Any]) -> str:
    first = next(m.content for m in messages if m.role == "user")
    return str(first).rsplit(" for ", 1)[-1]


def _seen(messages: list[Any]) -> list[str]:
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    return [str(m.content) for m in messages[last_user:] if m.role == "tool"]


@tool
def wipe(target: str, session: AgentSession) -> str:
    """Wipe a disk (irreversible)."""
    mark(session.session_id, f"wipe {target}")
    return f"wiped {target}"


@tool
def archive(target: str, session: AgentSession) -> str:
    """Archive a disk."""
    mark(session.session_id, f"archive {target}")
    return f"archived {target}"


@tool
def look(target: str, session: AgentSession) -> str:
    """Look at a disk (read-only, runs unasked)."""
    mark(session.session_id, f"look {target}")
    return f"{target} holds 3 files"


@tool
def hand_off(member: str, session: AgentSession) -> str:
    """Hand the work to another member of the team."""
    mark(session.session_id, f"hand_off {member}")
    session.context.put("handoff", member)
    return f"handed off to {member}"


EXPIRES_MS = 2000.0
"""The deadline of ``wipe`` in ``paths_expiring`` (long enough for the pause to be saved
before it falls due on a loaded machine; the sweeping test waits for it)."""


def paths_agent(expiring: bool = False) -> Any:
    """``paths``: one model turn asks for ``wipe(a)`` (call ``a``) and ``archive(b)``
    (call ``b``), both gated; the next turn answers with what the tools said.
    ``expiring``: ``wipe`` is gated by a policy whose deadline (``EXPIRES_MS``) rejects it."""

    def script(messages: list[Any], tools: Any) -> Any:
        sid, seen = _sid(messages), _seen(messages)
        mark(sid, f"think {len(seen)}")
        if seen:
            return "Done: " + "; ".join(seen)
        return [ToolCall("wipe", {"target": "a"}, id="a"),
                ToolCall("archive", {"target": "b"}, id="b")]  # fmt: skip

    gate = ApprovalPolicy(expires_after_ms=EXPIRES_MS) if expiring else None
    hitl = HITLInterceptor().on_tool("wipe", gate).on_tool("archive")
    name = "paths_expiring" if expiring else "paths"
    builder = ReActAgent.of(ScriptedModel(script)).name(name).tools(wipe, archive)
    return builder.interceptor(hitl).build()


def expiring_agent() -> Any:
    return paths_agent(expiring=True)


def again_agent() -> Any:
    """``again``: asks for ``wipe(a)`` (provider id ``c1``); once that ran, the model asks
    again under the same provider id, now for ``wipe(z)``; then it answers."""

    def script(messages: list[Any], tools: Any) -> Any:
        sid, seen = _sid(messages), _seen(messages)
        mark(sid, f"think {len(seen)}")
        if not seen:
            return [ToolCall("wipe", {"target": "a"}, id="c1")]
        if len(seen) == 1:
            return [ToolCall("wipe", {"target": "z"}, id="c1")]
        return "Done: " + "; ".join(seen)

    hitl = HITLInterceptor().on_tool("wipe")
    builder = ReActAgent.of(ScriptedModel(script)).name("again").tools(wipe)
    return builder.interceptor(hitl).build()


def lead_agent() -> Any:
    """``lead``, a team member: looks (unasked), then asks to wipe, then answers."""

    def script(messages: list[Any], tools: Any) -> Any:
        sid, seen = _sid(messages), _seen(messages)
        mark(sid, f"lead thinks {len(seen)}")
        if not seen:
            return [ToolCall("look", {"target": "a"})]
        if len(seen) == 1:
            return [ToolCall("wipe", {"target": "a"})]
        return "Done: " + "; ".join(seen)

    hitl = HITLInterceptor().on_tool("wipe")
    builder = ReActAgent.of(ScriptedModel(script)).name("lead").tools(look, wipe)
    return builder.interceptor(hitl).build()


def crew_team() -> Any:
    """``crew``: a team whose member ``lead`` asks for an approval mid-task."""
    spec = GraphSpec("crew")
    spec.add_start().link_add("lead")
    spec.add_agent(lead_agent()).link_add(END)
    spec.add_end()
    return TeamAgent.of().name("crew").graph(spec).build()


def billing_agent() -> Any:
    """``billing``: the member a hand-off goes to; it answers and leaves a line."""

    def script(messages: list[Any], tools: Any) -> Any:
        mark(_sid(messages), "billing ran")
        return "billing done"

    return ReActAgent.of(ScriptedModel(script)).name("billing").build()


def relay_team(batch: Sequence[str]) -> Any:
    """``relay``: member ``ops`` asks, in one model turn, for the calls named in ``batch``
    in that order — ``wipe`` (gated), ``archive`` (gated), ``nope`` (no such tool) and
    ``hand_off`` (to ``billing``, who runs after ``ops`` when it was handed the work)."""
    calls = {
        "wipe": ToolCall("wipe", {"target": "a"}, id="wipe"),
        "archive": ToolCall("archive", {"target": "b"}, id="archive"),
        "nope": ToolCall("nope", {"target": "c"}, id="nope"),
        "hand_off": ToolCall("hand_off", {"member": "billing"}, id="hand_off"),
    }

    def script(messages: list[Any], tools: Any) -> Any:
        sid, seen = _sid(messages), _seen(messages)
        mark(sid, f"ops thinks {len(seen)}")
        return "ops done" if seen else [calls[name] for name in batch]

    hitl = HITLInterceptor().on_tool("wipe").on_tool("archive")
    ops = (ReActAgent.of(ScriptedModel(script)).name("ops").tools(wipe, archive, hand_off)
           .interceptor(hitl).build())  # fmt: skip
    spec = GraphSpec("relay")
    spec.add_start().link_add("ops")
    spec.add_agent(ops).link_add("route")
    spec.add_exclusive("route").link_add(
        "billing", when=lambda ctx: ctx.get("handoff") == "billing"
    ).link_add(END)
    spec.add_agent(billing_agent()).link_add(END)
    spec.add_end()
    return TeamAgent.of().name("relay").graph(spec).build()


RELAY_BATCH = ("nope", "hand_off", "archive", "wipe")
"""The batch the served ``relay`` asks for: an unknown tool and a hand-off first."""


def relay() -> Any:
    return relay_team(RELAY_BATCH)


AGENTS: dict[str, Any] = {
    "paths": paths_agent,
    "paths_expiring": expiring_agent,
    "again": again_agent,
    "crew": crew_team,
    "relay": relay,
}
