"""What a worker serves, by task queue: its agents and its signing key, set by
:func:`~intermission.temporal.worker` and read by the workflow and the activity of a task
on that queue (so two workers in one process, on two queues, serve two tables)."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError

__all__ = ["agents", "audit_key", "key", "serve"]

_SERVED: dict[str, tuple[Any, bytes, bytes | None]] = {}


def serve(task_queue: str, agents: Any, key: bytes, audit_key: bytes | None = None) -> None:
    """Serve ``agents`` (an AgentTable) with ``key`` on ``task_queue`` in this process;
    ``audit_key``: the audit chain's key, read once when the worker starts (every worker and
    client of a namespace shares it: a replay on a worker keyed otherwise would rebuild
    another chain)."""
    _SERVED[task_queue] = (agents, key, audit_key)


def _served(task_queue: str) -> tuple[Any, bytes, bytes | None]:
    found = _SERVED.get(task_queue)
    if found is None:
        raise UsageError(
            f"no agents are served on task queue {task_queue!r} in this process: start its "
            "worker with intermission.temporal.worker()"
        )
    return found


def agents(task_queue: str) -> Any:
    """The agents served on ``task_queue``."""
    return _served(task_queue)[0]


def key(task_queue: str) -> bytes:
    """The key decisions on ``task_queue`` are signed with."""
    return _served(task_queue)[1]


def audit_key(task_queue: str) -> bytes | None:
    """The audit chain's key on ``task_queue`` (None: unkeyed)."""
    return _served(task_queue)[2]
