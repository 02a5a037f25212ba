"""ReActAgent: the reason → action → observation loop over a ChatModel (R13–R15, R3–R6)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _check
from .._json import canonical_dumps
from ..core.history import take_checkpoint
from ..decisions import fingerprint
from ..errors import (
    ModelCallError,
    ModelError,
    NothingToResumeError,
    SessionStateError,
    StoreError,
    ToolUnavailableError,
    UsageError,
)
from ..events import (
    ActionEndEvent,
    ActionStartEvent,
    ReasonDeltaEvent,
    ReasonEndEvent,
    ReasonStartEvent,
    RunEndEvent,
    RunStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..limits import MAX_MESSAGES
from ..messages import ChatMessage, ToolCall
from ..traces import BatchCall, ReActTrace
from ._base import AgentBase
from ._builder import BuilderBase
from .interceptors import ToolExchange, call_hook
from .models import ChatModel, counted_reply
from .request import AgentResponse
from .retry import RetryConfig, describe, model_error
from .tools import Tool, ToolArgumentError, observation_text, tool

if TYPE_CHECKING:
    from ..core.events_log import RunScope
    from ..core.session import AgentSession

__all__ = ["ReActAgent", "ReActAgentBuilder"]


class ReActAgentBuilder(BuilderBase):
    """Fluent builder returned by :meth:`ReActAgent.of`."""

    def __init__(self, model: ChatModel) -> None:
        super().__init__("react_agent")
        self._model = model
        self._system_prompt = ""
        self._tools: list[Tool] = []
        self._interceptors: list[Any] = []
        self._max_turns = 8
        self._window = 8
        self._output_key: str | None = None
        self._retry = RetryConfig()

    def system_prompt(self, text: str) -> ReActAgentBuilder:
        """The system prompt."""
        self._system_prompt = _check.text("system_prompt", text)
        return self

    def tools(self, *tools: Tool | Callable[..., Any]) -> ReActAgentBuilder:
        """Add tools (``@tool`` objects or plain typed functions)."""
        for t in tools:
            if not isinstance(t, Tool) and not callable(t):
                raise UsageError(f"a tool is a @tool or a typed function, not {type(t).__name__}")
        self._tools.extend(t if isinstance(t, Tool) else tool(t) for t in tools)
        return self

    def interceptor(self, *interceptors: Any) -> ReActAgentBuilder:
        """Add interceptors (run in the order added)."""
        self._interceptors.extend(interceptors)
        return self

    def max_turns(self, n: int) -> ReActAgentBuilder:
        """How many model calls a request may make (default 8)."""
        self._max_turns = _check.count("max_turns", n, 1, 10_000)
        return self

    def session_window(self, n: int) -> ReActAgentBuilder:
        """How many earlier session messages a new prompt sees (default 8)."""
        self._window = _check.count("session_window", n, 0, MAX_MESSAGES)
        return self

    def output_key(self, key: str) -> ReActAgentBuilder:
        """Also store the final answer in the session context under ``key``."""
        self._output_key = _check.text("output_key", key, empty=False)
        return self

    def retry_config(self, max_retries: int = 3, delay_ms: float = 1000) -> ReActAgentBuilder:
        """Retry a model call that failed for a moment — a connection error, a timeout,
        an empty reply, HTTP 429 or 5xx; never another 4xx, nor once its text began to
        stream — up to ``max_retries`` more times, waiting ``delay_ms × attempt`` before
        each (default 3 retries, 1000 ms; 0 retries turns it off). Interceptors'
        ``on_reason_retry`` runs before each retry."""
        self._retry = RetryConfig.checked(max_retries, delay_ms)
        return self

    def build(self) -> ReActAgent:
        """Build the agent."""
        return ReActAgent(self)


class ReActAgent(AgentBase):
    """An agent that reasons with a model and acts with tools; it can be paused anywhere.

    Build with ``ReActAgent.of(model).name(...).tools(...).interceptor(...).build()``.
    """

    def __init__(self, builder: ReActAgentBuilder) -> None:
        self._name = builder._name
        self.model = builder._model
        self.system_prompt = builder._system_prompt
        self.tools: dict[str, Tool] = {t.name: t for t in builder._tools}
        self.interceptors: tuple[Any, ...] = tuple(builder._interceptors)
        self.max_turns = builder._max_turns
        self.window = builder._window
        self.output_key = builder._output_key
        self.retry = builder._retry
        self.clock = builder._clock
        self.ids = builder._ids
        self.node_checkpoints = builder._checkpoints == "node"
        builder._versioned(self)

    def _fingerprint_data(self) -> Any:
        from .fingerprint import react_data

        return react_data(self.tools, self.interceptors)

    @staticmethod
    def of(model: ChatModel) -> ReActAgentBuilder:
        """Start building an agent on ``model``."""
        if not callable(getattr(model, "stream", None)):
            raise UsageError(
                "ReActAgent.of(model) takes a chat model with a stream(messages, tools) "
                f"method (ScriptedModel, OpenAIChatModel), not {type(model).__name__}"
            )
        return ReActAgentBuilder(model)

    # -- the loop -------------------------------------------------------------------
    async def run(
        self, session: AgentSession, prompt: str | None, scope: RunScope, *, top_level: bool
    ) -> AgentResponse:
        """One request on ``session`` (used by requests and by teams)."""
        trace = session.agent_state(self._name, ReActTrace)
        if not prompt:
            # ended for good only once its end was delivered: a run stopped between its
            # final answer and its RunEnd (a stream's reader left) still finishes on resume
            finished = (
                trace is not None
                and trace.route == "end"
                and (not top_level or session.status == "done")
            )
            if trace is None or trace.original_prompt is None or finished:
                raise NothingToResumeError(
                    f"agent {self._name!r} has nothing to resume on session "
                    f"{session.session_id!r}: the run already ended; send a new prompt",
                    session_id=session.session_id,
                )
        trace = self._open(
            session, trace, lambda: ReActTrace(agent_name=self._name), top_level=top_level
        )
        session.status = "running"
        trace._scope = scope
        trace._agent = self
        trace.run_id = scope.run_id
        if prompt:
            trace.reset(prompt, scope.run_id)
            if session.hitl.agent in (None, self._name):
                session.hitl.tasks.clear()  # a new task abandons what was pending
                session.hitl.decisions.clear()
                session.hitl.agent = None
            if top_level and self.window:
                trace.working_memory.extend(
                    m for m in session.messages[-self.window :] if m.role in ("user", "assistant")
                )
            user = ChatMessage.user(prompt)
            trace.working_memory.append(user)
            if top_level:
                session.add_message(user)
        elif trace.route != "end":  # (an answer already reached is delivered as it is)
            trace.final_answer = None
            trace.abnormal = False
        error: ModelError | None = None
        try:
            await call_hook(self.interceptors, "on_agent_start", trace)
            scope.emit(RunStartEvent, prompt=prompt)
            await scope.pace()
            while not session.is_pending:
                if self.node_checkpoints and trace.route != "end":
                    take_checkpoint(session)  # every step, with checkpoints("node")
                if trace.route == "reason":
                    error = await self._reason(session, trace, scope)
                    if error is not None:
                        break  # the model failed for good: the request ends, resumably
                elif trace.route == "action":
                    await self._action(session, trace, scope)
                else:
                    break
        except BaseException as exc:
            # cancellation (not an Exception) leaves the session resumable (R26)
            if isinstance(exc, Exception):
                session.status = "failed"
            else:
                session.status = "pending" if session.is_pending else "paused"
            raise
        content = trace.final_answer or ""
        if trace.route == "end" and self.output_key and not trace.abnormal:
            session.context.put(self.output_key, content)
        if trace.route == "end" and content and top_level:
            session.add_message(ChatMessage.assistant(content))
        if trace.abnormal:
            scope.emit(ReasonDeltaEvent, text=content, final=True)
        await call_hook(self.interceptors, "on_agent_end", trace)
        pending = session.is_pending
        if top_level:
            session.status = "pending" if pending else "done" if trace.route == "end" else "paused"
            scope.emit(
                RunEndEvent, content=content, is_abnormal=trace.abnormal, pending=pending,
                error=_error_text(error),
            )  # fmt: skip
        return AgentResponse(content, trace.abnormal, trace, session, error)

    def _messages(self, trace: ReActTrace) -> list[ChatMessage]:
        head = [ChatMessage.system(self.system_prompt)] if self.system_prompt else []
        return head + list(trace.working_memory)

    async def _reply(
        self,
        trace: ReActTrace,
        scope: RunScope,
        reason_id: str,
        texts: list[str],
        calls: list[ToolCall],
    ) -> dict[str, int] | None:
        """One model call: its text streamed as ReasonDelta events into ``texts``, its tool
        calls into ``calls``; returns its token counts when the model reports them. An
        empty reply raises a retryable ModelCallError. The messages are built anew for
        every attempt (an on_reason_retry hook may edit the working memory)."""
        usage: dict[str, int] | None = None
        await scope.pace()
        reply = counted_reply(
            self.model, trace, self._messages(trace), [t.schema for t in self.tools.values()]
        )
        try:
            async for chunk in reply:
                if chunk.text:
                    texts.append(chunk.text)
                    scope.emit(ReasonDeltaEvent, reason_id=reason_id, text=chunk.text)
                    await scope.pace()  # the model is read as fast as the stream is
                calls.extend(chunk.tool_calls)
                usage = getattr(chunk, "usage", None) or usage
        finally:
            await reply.aclose()  # a reply left unfinished is given again (see counted_reply)
        if not texts and not calls:
            raise ModelCallError("the model gave an empty reply", retryable=True)
        return usage

    async def _reason(
        self, session: AgentSession, trace: ReActTrace, scope: RunScope
    ) -> ModelError | None:
        """One reason step; returns the model's error when it failed for good (the
        request then ends, resumably)."""
        trace.turn += 1
        if trace.turn > self.max_turns:
            trace.set_final_answer(
                f"Agent error: maximum turns reached ({self.max_turns}).", abnormal=True
            )
            return None
        await call_hook(self.interceptors, "on_reason_start", trace)
        if session.is_pending or trace.route != "reason":
            trace.turn -= 1
            return None
        reason_id = self.ids("reason")
        scope.emit(ReasonStartEvent, reason_id=reason_id, turn=trace.turn)
        started = scope.clock.now_ms()
        texts: list[str] = []
        calls: list[ToolCall] = []
        usage: dict[str, int] | None = None
        attempt = 0
        while True:
            try:
                usage = await self._reply(trace, scope, reason_id, texts, calls)
                break
            except Exception as exc:  # (an error of the model, typed: see retry.py)
                error = model_error(exc)
                retry = getattr(error, "retryable", False) and not texts
                if not retry or attempt >= self.retry.max_retries:
                    # the request ends abnormally and stays resumable: an empty prompt
                    # asks the model again
                    if isinstance(error, ModelCallError):
                        error.attempts = attempt + 1
                    trace.turn -= 1
                    trace.final_answer, trace.abnormal = describe(error), True
                    return error
                calls.clear()
                attempt += 1
                await call_hook(self.interceptors, "on_reason_retry", trace, error, attempt)
                if session.is_pending or trace.route != "reason":
                    trace.turn -= 1
                    return None
                await _sleep(self.retry.wait_s(attempt))
            except BaseException:
                trace.turn -= 1  # stopped mid-reply: the model is asked again on resume
                raise
        calls = self._identify(trace, calls)
        message = ChatMessage.assistant("".join(texts), calls)
        duration = scope.clock.now_ms() - started
        await call_hook(self.interceptors, "on_reason_end", trace, message, duration)
        scope.emit(
            ReasonEndEvent,
            reason_id=reason_id,
            content=message.content,
            tool_calls=calls,
            duration_ms=duration,
            **({"usage": usage} if usage else {}),
        )
        if session.is_pending:
            trace.turn -= 1  # R5/R6: a pending here discards the reply; resume asks again
            return None
        trace.last_reason = message
        trace.effect_ids = self._mint(session, trace, calls)
        if calls:
            trace.route = "action"
        else:
            trace.working_memory.append(message)
            trace.set_final_answer(message.content)
        await scope.pace()  # the reply is kept: a reader that stops here resumes from it
        return None

    def _identify(self, trace: ReActTrace, calls: list[ToolCall]) -> list[ToolCall]:
        """The calls with call UUIDs unique in the request (R48): the provider's id when it
        has one that is new here, else that id with a suffix (``call_0.2``) — a model that
        numbers calls per reply, or gives two calls one id, never makes two calls share a
        UUID (HITL tasks, decisions and tool results are keyed by it)."""
        taken = {c.id for m in trace.working_memory for c in m.tool_calls if c.id}
        taken.update(m.tool_call_id for m in trace.working_memory if m.tool_call_id)
        named = []
        for c in calls:
            uuid = c.id or self.ids("call")
            if uuid in taken:
                n = 2
                while f"{uuid}.{n}" in taken:
                    n += 1
                uuid = f"{uuid}.{n}"
            taken.add(uuid)
            named.append(c if uuid == c.id else ToolCall(c.name, c.args, uuid))
        return named

    def _mint(
        self, session: AgentSession, trace: ReActTrace, calls: list[ToolCall]
    ) -> dict[str, str]:
        """An effect id for every proposed call, ours and never the provider's (R48): the
        session's generation, this agent and the session's count of its proposals.

        The generation is minted with the session and anew for every fork, so a fork (also
        one saved under a deleted fork's id) or a new session under a deleted id never
        names an effect another proposal ran, whatever the id factory or the model's call
        ids. The count is saved with the session, so a request that crashed after an
        unapproved (ledgered) call ran and proposes it again names the same effect: the
        ledger answers and the call is not sent twice."""
        minted = {}
        generation = getattr(session, "generation", None) or os.urandom(8).hex()
        for c in calls:
            trace.proposed += 1
            minted[c.id or ""] = f"effect-{generation}.{self._name}.{trace.proposed}"
        return minted

    async def _action(self, session: AgentSession, trace: ReActTrace, scope: RunScope) -> None:
        assert trace.last_reason is not None
        if trace.batch is None and not await self._open_batch(session, trace, scope):
            return
        assert trace.batch is not None
        exchanges = [
            ToolExchange(c.call_uuid, c.tool_name, dict(c.args), c.result, c.note, c.error,
                         meta={"approved": True, "approval": c.approval} if c.approved else {})
            for c in trace.batch
        ]  # fmt: skip
        for call, ex in zip(trace.batch, exchanges, strict=True):
            if call.done:
                continue  # ended before a stop: its result is kept, it does not run again
            await call_hook(self.interceptors, "on_tool_call_start", trace, ex)
            if session.is_pending or _ended(trace):
                await call_hook(self.interceptors, "on_tool_call_end", trace, ex, None, None, 0.0)
                trace.batch = None
                trace.route = "reason" if session.is_pending else trace.route
                return  # the batch is abandoned: nothing of it reaches memory (R6)
            call.args = dict(ex.args)
            scope.emit(
                ToolCallStartEvent, call_uuid=ex.call_uuid, tool_name=ex.tool_name, args=ex.args
            )
            await scope.pace()  # a reader that stops here: the tool never starts (R41)
            await self._call(session, trace, scope, call, ex)
            await scope.pace()
        results = [ChatMessage.tool(c.call_uuid, c.tool_name, c.observation) for c in trace.batch]
        trace.working_memory.append(trace.last_reason)
        trace.working_memory.extend(results)
        trace.tool_count += len(results)
        trace.batch = None
        trace.route = "reason"
        await call_hook(self.interceptors, "on_action_end", trace, exchanges)
        scope.emit(ActionEndEvent)
        await scope.pace()

    async def _open_batch(self, session: AgentSession, trace: ReActTrace, scope: RunScope) -> bool:
        """Run the batch's ``on_action_start`` hooks (HITL suspends or applies decisions
        here) and keep the batch in the trace; False when it does not run."""
        assert trace.last_reason is not None
        calls = trace.last_reason.tool_calls
        trace.route = "reason"
        exchanges = [ToolExchange(c.id or "", c.name, dict(c.args)) for c in calls]
        await call_hook(self.interceptors, "on_action_start", trace, exchanges)
        if session.is_pending:
            await scope.pace()  # (HITLPending reaches the reader before RunEnd)
            return False  # vetoed before anything ran (HITL suspends here, R19)
        if _ended(trace):
            scope.emit(ActionEndEvent)  # single reject: ActionEnd without ActionStart (R25)
            await scope.pace()
            return False
        trace.batch = [
            BatchCall(call_uuid=ex.call_uuid, tool_name=ex.tool_name, args=dict(ex.args),
                      result=ex.result, note=ex.note, error=ex.error,
                      approved=bool(ex.meta.get("approved")),
                      approval=ex.meta.get("approval"))
            for ex in exchanges
        ]  # fmt: skip
        trace.route = "action"
        scope.emit(ActionStartEvent, tool_calls=list(calls))
        await scope.pace()
        return True

    async def _call(
        self,
        session: AgentSession,
        trace: ReActTrace,
        scope: RunScope,
        call: BatchCall,
        ex: ToolExchange,
    ) -> None:
        """Run one call and record it. Once started, a tool finishes even when the run is
        cancelled meanwhile (shielded): its end is recorded, then the cancel goes on."""
        import asyncio

        started = scope.clock.now_ms()
        cancelled = False
        if ex.result is None and getattr(session, "effects", "real") == "dry-run":
            # a preview fork (R44): the call is recorded with the arguments it would use
            ex.result = f"[dry run] not run: {ex.tool_name}({canonical_dumps(ex.args)})"
            ex.error = "dry_run"
        if ex.result is None:
            task = asyncio.ensure_future(self._invoke(ex, session, trace.effect_id(ex.call_uuid)))
            while True:
                try:
                    ex.result, ex.error = await asyncio.shield(task)
                    break
                except asyncio.CancelledError:
                    if task.done():
                        raise  # the tool itself was cancelled (not by us): not recorded
                    cancelled = True  # let the tool finish; the cancel is raised after
        duration = scope.clock.now_ms() - started
        call.result, call.error, call.note = ex.result, ex.error, ex.note
        call.duration_ms = duration
        call.done = True
        await call_hook(
            self.interceptors, "on_tool_call_end", trace, ex, ex.result, ex.error, duration
        )
        scope.emit(
            ToolCallEndEvent,
            call_uuid=ex.call_uuid,
            tool_name=ex.tool_name,
            args=ex.args,
            observation=call.observation,
            error=ex.error,
            duration_ms=duration,
        )
        if cancelled:
            raise asyncio.CancelledError

    async def _invoke(
        self, ex: ToolExchange, session: AgentSession, effect_id: str
    ) -> tuple[str, str | None]:
        """Run one tool; failures become observations, never exceptions (R14)."""
        t = self.tools.get(ex.tool_name)
        if t is None:
            return f"Tool [{ex.tool_name}] not found.", "not_found"
        try:
            once = getattr(session, "once_async", None)
            if ex.meta.get("approved") and once is not None and not getattr(t, "ledgered", False):
                # an approved call runs once (R32, R48): through the ledger under our effect
                # id and the arguments that run, so a crash after the tool did its work and
                # before the save never runs it again (it is of unknown outcome instead);
                # MCP tools ledger their own calls
                key = f"tool/{ex.tool_name}/{effect_id}/{fingerprint(ex.args)}"

                async def run() -> str:
                    return observation_text(
                        await t.invoke(ex.args, session, ex.call_uuid, effect_id=effect_id)
                    )

                approval = ex.meta.get("approval")  # (R60: who may resolve it, if need be)
                if approval is None:
                    return str(await once(key, run)), None
                return str(await once(key, run, approval=approval)), None
            approval = ex.meta.get("approval")
            if approval is not None and getattr(t, "ledgered", False):  # (an MCP tool, R60)
                invoke: Any = t.invoke  # (a tool that ledgers its own calls takes approval=)
                outcome = await invoke(
                    ex.args, session, ex.call_uuid, effect_id=effect_id, approval=approval
                )
            else:
                outcome = await t.invoke(ex.args, session, ex.call_uuid, effect_id=effect_id)
            return observation_text(outcome), None
        except ToolArgumentError as exc:
            return str(exc), "invalid_arguments"
        except (SessionStateError, StoreError, ToolUnavailableError):
            # not a tool failure: an effect of unknown outcome, a lost claim, a database or
            # a tool server that went away stops the run (nothing is saved), so a human or
            # a retry can look, instead of the model reading it as an observation
            raise
        except Exception as exc:
            return f"Execution error in tool {ex.tool_name}: {type(exc).__name__}: {exc}", "error"

    def __repr__(self) -> str:
        return f"<ReActAgent {self._name!r} tools={list(self.tools)}>"


def _error_text(error: ModelError | None) -> str | None:
    return None if error is None else f"{type(error).__name__}: {error}"


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def _ended(trace: ReActTrace) -> bool:
    # a function, not an inline compare: hooks change the route behind mypy's narrowing
    return trace.route == "end"
