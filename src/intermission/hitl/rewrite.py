"""Rewriting a pending call's arguments on purpose — what a migration does when a tool
changed under a paused session (R62). The approval given to the old arguments is void:
its votes and decision are dropped, so the resume pauses again and a reviewer approves
what will now run."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .._json import canonical_dumps, check_json
from ..audit import AuditEntry, note
from ..decisions import HITLTask
from ..errors import InvalidDecisionError, NotSerializableError, UsageError

__all__ = ["migrating_to", "rewrite_args"]

_MIGRATING_TO: ContextVar[Any] = ContextVar("intermission_migrating_to", default=None)


@contextmanager
def migrating_to(agent: Any) -> Any:
    """Within this block (a migration), rewritten arguments are checked against the tools
    of ``agent``, the version the session moves to."""
    token = _MIGRATING_TO.set(agent)
    try:
        yield
    finally:
        _MIGRATING_TO.reset(token)


def rewrite_args(
    session: Any, task: HITLTask | str, args: dict[str, Any], *, agent: Any = None
) -> HITLTask:
    """Replace the arguments of the pending call ``task`` (a task or its call UUID) with
    ``args`` and void its votes and decision; returns the rewritten task. The arguments are
    checked against the tool of ``agent`` (default: the agent a running migration moves
    the session to), else the schema the task carries. The call keeps its UUID: the
    effect is the same one, now with other arguments. Raises InvalidDecisionError for an
    unknown call or arguments that do not fit, changing nothing."""
    uuid = task.call_uuid if isinstance(task, HITLTask) else task
    if not isinstance(uuid, str):
        raise UsageError(f"rewrite_args takes a task or its call UUID, not {type(task).__name__}")
    state = session.hitl
    found = next((t for t in state.tasks if t.call_uuid == uuid), None)
    if found is None:
        raise InvalidDecisionError(
            f"no pending call {uuid!r} on session {session.session_id!r}; nothing was changed",
            call_uuid=uuid,
        )
    fitted, schema = _fitted(found, args, agent if agent is not None else _MIGRATING_TO.get())
    voided = len(found.votes) + (1 if uuid in state.decisions else 0)
    rewritten: HITLTask = found.model_copy(
        update={"args": fitted, "votes": [], "args_schema": schema}
    )
    state.tasks = [rewritten if t.call_uuid == uuid else t for t in state.tasks]
    state.decisions.pop(uuid, None)
    _rewrite_batches(session, uuid, fitted)
    note(session, AuditEntry(
        action="task.rewritten", target=uuid, via="system",
        reason=f"arguments of {found.tool_name} rewritten; its approval starts over",
        detail={"tool": found.tool_name, "voided": voided},
    ))  # fmt: skip
    return rewritten


def _fitted(task: HITLTask, args: Any, agent: Any) -> tuple[dict[str, Any], Any]:
    """``args`` as the tool takes them, and the schema the task carries from now on."""
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise InvalidDecisionError(
            f"rewrite_args takes a dict of argument names to values, not {type(args).__name__}",
            call_uuid=task.call_uuid,
        )
    try:
        check_json("args", args)
    except NotSerializableError as exc:
        raise InvalidDecisionError(str(exc), call_uuid=task.call_uuid) from None
    plain: dict[str, Any] = json.loads(canonical_dumps(args))
    tool = getattr(agent, "tools", {}).get(task.tool_name) if agent is not None else None
    if tool is not None and hasattr(tool, "validate"):
        from ..agents.tools import ToolArgumentError

        try:
            tool.validate(plain)
        except ToolArgumentError as exc:
            raise InvalidDecisionError(str(exc), call_uuid=task.call_uuid) from None
        return plain, copy.deepcopy(tool.parameters)
    if task.args_schema is not None:
        from .._schema import SchemaMismatch, conform

        try:
            conform(plain, task.args_schema)
        except SchemaMismatch as exc:
            raise InvalidDecisionError(
                f"arguments for {task.tool_name!r} do not fit its schema: {exc}",
                call_uuid=task.call_uuid,
            ) from None
    return plain, task.args_schema


def _rewrite_batches(session: Any, uuid: str, args: dict[str, Any]) -> None:
    """The arguments the resume will run: the call in its agent's batch and the model's
    proposal the resume re-reads (a batch paused for approval is rebuilt from
    ``last_reason``'s tool calls, so rewriting the batch alone would pause again on the
    old arguments); a team's members keep their own traces; loaded or still JSON."""
    for trace in session.traces.values():
        loaded = not isinstance(trace, dict)
        batch = getattr(trace, "batch", None) if loaded else trace.get("batch")
        reason = getattr(trace, "last_reason", None) if loaded else trace.get("last_reason")
        if reason is None:
            proposed: Any = ()
        elif isinstance(reason, dict):
            proposed = reason.get("tool_calls") or ()
        else:
            proposed = getattr(reason, "tool_calls", None) or ()
        for call in [*(batch or ()), *proposed]:
            if isinstance(call, dict):
                if uuid in (call.get("call_uuid"), call.get("id")):
                    call["args"] = dict(args)
            elif uuid in (getattr(call, "call_uuid", None), getattr(call, "id", None)):
                call.args = dict(args)
