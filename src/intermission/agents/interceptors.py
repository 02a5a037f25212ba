"""ReActInterceptor: hooks around every step of the ReAct loop (R13)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from ..messages import ChatMessage
from ..traces import ReActTrace

__all__ = ["ReActInterceptor", "ToolExchange", "call_hook"]


@dataclass(slots=True)
class ToolExchange:
    """One tool call in flight.

    Interceptors may edit ``args`` or fill in ``result`` ahead of time (then the tool does
    not run)."""

    call_uuid: str
    tool_name: str
    args: dict[str, Any]
    result: str | None = None
    note: str | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class ReActInterceptor:
    """Hooks around a ReAct agent's run: subclass and override any of them.

    Each hook may be sync or async. Calling ``trace.session.pending(True, reason)`` in a
    hook pauses the run at that point."""

    def on_agent_start(self, trace: ReActTrace) -> Any:
        """Once per request, after the prompt is handled, before RunStart."""

    def on_reason_start(self, trace: ReActTrace) -> Any:
        """Before each model call."""

    def on_reason_retry(self, trace: ReActTrace, error: Exception, attempt: int) -> Any:
        """Before the model is asked again after a transient failure (``error``, a
        ModelCallError; ``attempt``: the retry about to be made, from 1). The messages are
        built anew from ``trace.working_memory`` for every attempt, so a hook may trim or
        rewrite it here; pending the session here stops the run, resumably."""

    def on_reason_end(self, trace: ReActTrace, message: ChatMessage, duration_ms: float) -> Any:
        """After each model reply."""

    def on_action_start(self, trace: ReActTrace, exchanges: list[ToolExchange]) -> Any:
        """Before any tool of a batch runs; pending or ending here vetoes the batch."""

    def on_tool_call_start(self, trace: ReActTrace, exchange: ToolExchange) -> Any:
        """Before each tool; may edit args, pre-fill a result, or pend."""

    def on_tool_call_end(
        self,
        trace: ReActTrace,
        exchange: ToolExchange,
        observation: str | None,
        error: str | None,
        duration_ms: float,
    ) -> Any:
        """After each tool (always, also for abandoned calls with observation None)."""

    def on_action_end(self, trace: ReActTrace, exchanges: list[ToolExchange]) -> Any:
        """After the batch (not when it was abandoned by a pending)."""

    def on_agent_end(self, trace: ReActTrace) -> Any:
        """At the end of every request (finished, pending or abnormal)."""

    def policy_data(self) -> Any:
        """What of this interceptor decides the agent's effects, as JSON data (None: it
        only watches). It is part of the agent's fingerprint: a session refuses an agent
        whose policy differs from its own (AgentMismatchError) unless adopted. The HITL
        interceptor returns its approval policy; an interceptor that vetoes, edits or
        gates tool calls should return what it enforces."""
        return None


async def call_hook(interceptors: tuple[Any, ...], name: str, *args: Any) -> None:
    """Call hook ``name`` on every interceptor that has it, awaiting async hooks."""
    for interceptor in interceptors:
        hook = getattr(interceptor, name, None)
        if hook is None:
            continue
        result = hook(*args)
        if inspect.isawaitable(result):
            await result
