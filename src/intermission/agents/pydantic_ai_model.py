"""Any pydantic-ai model as a ChatModel (extra ``pydantic-ai``, R46).

pydantic-ai already speaks to OpenAI, Anthropic, Gemini, Groq, Mistral, Bedrock, Ollama and
more; this adapter hands it intermission's conversation and tool schemas through its direct
API (``pydantic_ai.direct``) and turns its reply — streamed text and tool calls — into
:class:`~intermission.agents.models.ModelChunk`. The agent loop, HITL and events are the
same as with any other model. pydantic-ai is imported on first use, never at import.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from .._compat import require
from .._ids import RANDOM_IDS, IdFactory
from ..errors import ModelError, UsageError
from ..messages import ChatMessage, ToolCall
from .models import ModelChunk, ToolSchema

__all__ = ["PydanticAIModel"]


def _pai() -> Any:
    require("pydantic_ai", "pydantic-ai")
    from pydantic_ai import direct, messages, models, tools

    return direct, messages, models, tools


def to_pydantic_ai(history: list[ChatMessage]) -> list[Any]:
    """The conversation as pydantic-ai ``ModelRequest``/``ModelResponse`` messages:
    system, user and tool messages gather into requests, assistant messages (with their
    tool calls) are responses, in order."""
    _, m, _, _ = _pai()
    out: list[Any] = []
    parts: list[Any] = []

    def flush() -> None:
        if parts:
            out.append(m.ModelRequest(parts=list(parts)))
            parts.clear()

    for msg in history:
        if msg.role == "system":
            parts.append(m.SystemPromptPart(content=msg.content))
        elif msg.role == "user":
            parts.append(m.UserPromptPart(content=msg.content))
        elif msg.role == "tool":
            parts.append(
                m.ToolReturnPart(
                    tool_name=msg.name or "", content=msg.content,
                    tool_call_id=msg.tool_call_id or "",
                )
            )  # fmt: skip
        else:
            flush()
            reply: list[Any] = [m.TextPart(content=msg.content)] if msg.content else []
            reply += [
                m.ToolCallPart(tool_name=c.name, args=dict(c.args), tool_call_id=c.id or "")
                for c in msg.tool_calls
            ]
            out.append(m.ModelResponse(parts=reply or [m.TextPart(content="")]))
    flush()
    return out


def _args(part: Any) -> dict[str, Any]:
    args = part.args
    if args is None or args == "":
        return {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            raise ModelError(
                f"tool call {part.tool_name!r}: arguments are not JSON: {args[:200]!r}"
            ) from None
    if not isinstance(args, dict):
        raise ModelError(f"tool call {part.tool_name!r}: arguments are not a JSON object")
    return args


class PydanticAIModel:
    """A chat model backed by pydantic-ai, given a pydantic-ai model or a model name.

    ``PydanticAIModel(model_or_name)``: a pydantic-ai model — an instance such as
    ``FunctionModel``/``TestModel``/``OpenAIChatModel(...)``, or a name such as
    ``"openai:gpt-4o-mini"``, ``"anthropic:claude-…"``, ``"google-gla:gemini-…"``,
    ``"groq:…"``, ``"ollama:…"`` (built on first use, so a missing API key is a ModelError
    at the first request, not at import).

    ``stream=False`` asks for whole replies; a model that cannot stream is asked whole
    anyway. ``settings``: pydantic-ai ``ModelSettings`` (temperature, max_tokens…).
    Provider errors become :class:`~intermission.errors.ModelError` (keeping the
    provider's error as the cause, so a ReAct agent retries HTTP 429/5xx, connection
    errors and timeouts, see ``ReActAgentBuilder.retry_config``). Without the
    ``pydantic-ai`` extra, making the model raises MissingDependencyError. Tool call ids from
    the provider are kept unless one repeats in the conversation (a test model's fixed
    ids), which gets a fresh id: approvals are keyed by call id (R18).
    """

    def __init__(
        self,
        model: Any,
        *,
        stream: bool = True,
        settings: dict[str, Any] | None = None,
        ids: IdFactory | None = None,
    ) -> None:
        if not isinstance(model, str) and not hasattr(model, "request"):
            raise UsageError(
                "PydanticAIModel takes a pydantic-ai model or a model name such as "
                f"'openai:gpt-4o-mini', not {type(model).__name__}"
            )
        if isinstance(model, str) and not model.strip():
            raise UsageError("a model name is not empty: e.g. 'openai:gpt-4o-mini'")
        if settings is not None and not isinstance(settings, dict):
            raise UsageError(f"settings is a dict (ModelSettings), not {type(settings).__name__}")
        require("pydantic_ai", "pydantic-ai")  # a missing extra is an error now, not a reply
        self.model = model
        self.streaming = bool(stream)
        self.settings = settings
        self.ids = ids or RANDOM_IDS
        self._instance: Any = None

    @property
    def name(self) -> str:
        """The model's name (``provider:model`` or the instance's own name)."""
        if isinstance(self.model, str):
            return self.model
        return str(getattr(self.model, "model_name", type(self.model).__name__))

    def _model(self) -> Any:
        if self._instance is None:
            _, _, models, _ = _pai()
            try:
                self._instance = models.infer_model(self.model)
            except Exception as exc:  # unknown provider, missing API key or SDK
                raise ModelError(
                    f"pydantic-ai cannot build model {self.name!r}: {type(exc).__name__}: {exc}"
                ) from exc
        return self._instance

    def _parameters(self, tools: list[ToolSchema]) -> Any:
        _, _, models, t = _pai()
        return models.ModelRequestParameters(
            function_tools=[
                t.ToolDefinition(
                    name=s["name"],
                    description=s.get("description") or None,
                    parameters_json_schema=s.get("parameters") or {"type": "object"},
                )
                for s in tools
            ],
            allow_text_output=True,
        )

    def _calls(self, response: Any, history: list[ChatMessage]) -> list[ToolCall]:
        _, m, _, _ = _pai()
        seen = {c.id for msg in history for c in msg.tool_calls if c.id}
        calls = []
        for part in response.parts:
            if not isinstance(part, m.ToolCallPart):
                continue
            cid = part.tool_call_id
            if not cid or cid in seen:
                cid = self.ids("call")
            seen.add(cid)
            calls.append(ToolCall(part.tool_name, _args(part), cid))
        return calls

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSchema]
    ) -> AsyncIterator[ModelChunk]:
        """Stream the reply: text as it comes, tool calls at the end."""
        direct, m, _, _ = _pai()
        model = self._model()
        history = to_pydantic_ai(messages)
        params = self._parameters(tools)
        try:
            if self.streaming and _can_stream(model):
                try:
                    opened = direct.model_request_stream(
                        model, history, model_settings=self.settings,
                        model_request_parameters=params,
                    )  # fmt: skip
                    async with opened as stream:
                        async for event in stream:
                            delta = _text_delta(m, event)
                            if delta:
                                yield ModelChunk(text=delta)
                        response = stream.get()
                    calls = self._calls(response, messages)
                    usage = _usage(response)
                    if calls or usage:
                        yield ModelChunk(tool_calls=calls, usage=usage)
                    return
                except NotImplementedError:
                    pass  # this model cannot stream: ask for the whole reply
            response = await direct.model_request(
                model, history, model_settings=self.settings, model_request_parameters=params
            )
        except ModelError:
            raise
        except Exception as exc:  # provider, transport and protocol errors alike
            raise ModelError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        text = "".join(p.content for p in response.parts if isinstance(p, m.TextPart))
        yield ModelChunk(
            text=text, tool_calls=self._calls(response, messages), usage=_usage(response)
        )

    def __repr__(self) -> str:
        return f"PydanticAIModel({self.name!r})"


def _usage(response: Any) -> dict[str, int] | None:
    """The reply's token counts, when the provider reported any."""
    usage = getattr(response, "usage", None)
    counts = {
        key: value
        for key in ("input_tokens", "output_tokens")
        if isinstance(value := getattr(usage, key, None), int) and not isinstance(value, bool)
    }
    return counts if any(counts.values()) else None


def _can_stream(model: Any) -> bool:
    """False for a model known not to stream: a FunctionModel given only ``function``
    (others say so with NotImplementedError, which is caught)."""
    return not (hasattr(model, "stream_function") and model.stream_function is None)


def _text_delta(m: Any, event: Any) -> str:
    """The text an event of a pydantic-ai stream adds (PartStart of a text part carries
    the first piece, PartDelta the rest)."""
    if isinstance(event, m.PartStartEvent) and isinstance(event.part, m.TextPart):
        return str(event.part.content)
    if isinstance(event, m.PartDeltaEvent) and isinstance(event.delta, m.TextPartDelta):
        return str(event.delta.content_delta)
    return ""
