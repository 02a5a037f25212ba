"""The activity that runs a session between its pauses.

``intermission.advance`` restores the session from the workflow's snapshot and runs its
agent — a new prompt, or the empty prompt that resumes it — until it pauses or ends; model
calls, tool calls and ``session.once`` effects run here, on a worker, never in workflow
code. It returns the snapshot and what the run noted for the audit trail.

A worker that dies inside it (SIGKILL, a lost host) stops heartbeating; after
``ADVANCE_HEARTBEAT`` (10 s) Temporal gives the activity to another worker, which runs
the session again from the same snapshot: an approved tool call gets the same effect id
(ours: the session's generation, the agent and its count of proposals). A tool that died
before its effect runs it once, on the new worker; one that died after its effect and before
the activity ended runs again (at least once, as every Temporal activity): unlike the SQL
stores, which record the effect's start and stop at an effect of unknown outcome, this
store does not yet detect that case, so a tool with side effects must be idempotent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..audit import noted
from ..core.session import InMemoryAgentSession
from ..errors import IntermissionError
from . import registry
from .wire import Advance, Advanced

__all__ = ["advance"]


class _NotBefore:
    """The worker's clock, never behind the workflow's time when it started the activity
    (a deadline that the workflow's timer found passed is passed here too)."""

    def __init__(self, floor_ms: float) -> None:
        from .._clock import SYSTEM_CLOCK

        self._system = SYSTEM_CLOCK
        self._floor = floor_ms

    def now_ms(self) -> float:
        return max(self._system.now_ms(), self._floor)


def _run(job: Advance, task_queue: str) -> Advanced:
    from ..stores.decide import runner_for

    table = registry.agents(task_queue)
    clock = _NotBefore(job.not_before_ms)
    if job.snapshot is None:
        assert job.start is not None
        session = InMemoryAgentSession(job.session_id, clock=clock)
        request = table.newest(job.agent).prompt(job.start.prompt).session(session)
        if job.start.requester is not None:
            request = request.principal(job.start.requester)
    else:
        session = InMemoryAgentSession.restore(job.snapshot)
        session.clock = clock
        request = runner_for(table, session).prompt().session(session)
    response: Any = request.call()
    return Advanced(
        snapshot=session.to_json(),
        audit=list(noted(session)),
        status=session.status,
        answer=response.content or None,
    )


@activity.defn(name="intermission.advance")
async def advance(job: Advance) -> Advanced:
    """Run the session until it pauses or ends (heartbeating every second meanwhile)."""
    run = asyncio.ensure_future(asyncio.to_thread(_run, job, activity.info().task_queue))
    while True:
        done, _ = await asyncio.wait({run}, timeout=1.0)
        if done:
            try:
                return run.result()
            except IntermissionError as exc:  # the agent refuses for good (an unknown agent,
                # a version no longer served): retrying cannot help, the workflow says why
                raise ApplicationError(f"{type(exc).__name__}: {exc}", type=type(exc).__name__,
                                       non_retryable=True) from exc  # fmt: skip
        activity.heartbeat()
