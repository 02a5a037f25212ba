"""Rewriting a pending call's arguments on purpose — what a migration does when a tool
changed under a paused session (R62). The approval given to the old arguments is void:
its votes and decision are dropped, so the resume pauses again and a reviewer approves
what will now run.

The rewritten call gets a new call UUID (``<old>.r1``): an approval is addressed by call
UUID (a console card, ``approve --call``, a widget row opened before the migration), and a
reviewer who saw the old arguments must not approve the new ones by that address — a
decision on the old UUID is refused as a call that no longer waits. The effect keeps its
identity (its effect id), so a ledger entry is never run twice under two names."""

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
    fresh = _fresh_uuid(session, uuid)
    rewritten: HITLTask = found.model_copy(
        update={"call_uuid": fresh, "args": fitted, "votes": [], "args_schema": schema}
    )
    state.tasks = [rewritten if t.call_uuid == uuid else t for t in state.tasks]
    state.decisions.pop(uuid, None)
    state.expired = [fresh if u == uuid else u for u in state.expired]
    for trace in session.traces.values():
        _rekey(trace, uuid, fresh, fitted)
    note(session, AuditEntry(
        action="task.rewritten", target=fresh, via="system",
        reason=f"arguments of {found.tool_name} rewritten; its approval starts over",
        detail={"tool": found.tool_name, "voided": voided, "replaces": uuid},
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


def _fresh_uuid(session: Any, uuid: str) -> str:
    """``<uuid>.r<n>``: a call UUID nothing in the session uses yet."""
    taken = {t.call_uuid for t in session.hitl.tasks}
    for trace in session.traces.values():
        for message in [_get(trace, "last_reason"), *(_get(trace, "working_memory") or ())]:
            if message is not None:
                taken.update(_get(c, "id") for c in _get(message, "tool_calls") or ())
                taken.add(_get(message, "tool_call_id"))
    base, _, n = uuid.rpartition(".r")
    start = int(n) + 1 if base and n.isdigit() else 1
    root = base if base and n.isdigit() else uuid
    k = start
    while f"{root}.r{k}" in taken:
        k += 1
    return f"{root}.r{k}"


def _rekey(trace: Any, uuid: str, fresh: str, args: dict[str, Any]) -> None:
    """Call ``uuid`` becomes ``fresh`` with ``args`` wherever the agent keeps it (a team's
    members keep their own traces; a trace may be loaded or still JSON): the batch in
    progress and the model's proposal the next batch is built from (``last_reason``, the
    same message in working memory); its effect id stays the one minted for it."""
    for call in _get(trace, "batch") or ():
        if _get(call, "call_uuid") == uuid:
            _set(call, call_uuid=fresh, args=dict(args))
    found = False
    for message in [_get(trace, "last_reason"), *(_get(trace, "working_memory") or ())]:
        for call in (_get(message, "tool_calls") or ()) if message is not None else ():
            if _get(call, "id") == uuid:
                _set(call, id=fresh, args=dict(args))
                found = True
    effects = _get(trace, "effect_ids")
    if found and isinstance(effects, dict):
        effects[fresh] = effects.pop(uuid, uuid)  # (the same effect, whatever its address)


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _set(obj: Any, **values: Any) -> None:
    for key, value in values.items():
        if isinstance(obj, dict):
            obj[key] = value
        else:
            setattr(obj, key, value)
