"""What a span says about an agent and its model: names, the provider, the request model,
and opt-in message content in the conventions' JSON shape (no OpenTelemetry import)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["agent_of", "messages_json", "model_of", "output_json", "provider_of"]

_PROVIDERS = {
    "openai": "openai", "anthropic": "anthropic", "google-gla": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai", "gemini": "gcp.gemini", "groq": "groq",
    "mistral": "mistral_ai", "bedrock": "aws.bedrock", "cohere": "cohere",
    "deepseek": "deepseek", "azure": "azure.ai.openai", "xai": "x_ai",
    "huggingface": "huggingface",
}  # fmt: skip
"""pydantic-ai name prefixes → the conventions' provider names (others pass as they are)."""


def agent_of(session: Any, name: str) -> Any:
    """The agent object running ``name``'s state in ``session`` (None when unknown)."""
    traces = getattr(session, "traces", None)
    state = traces.get(name) if isinstance(traces, dict) else None
    return getattr(state, "_agent", None) if state is not None else None


def provider_of(model: Any) -> str:
    """``gen_ai.provider.name`` for a chat model (``intermission`` for no model)."""
    if model is None:
        return "intermission"
    kind = type(model).__name__
    if kind == "ScriptedModel":
        return "intermission.scripted"
    if kind == "OpenAIChatModel":
        return "openai"
    if kind == "PydanticAIModel":
        name = str(getattr(model, "name", ""))
        prefix, colon, _ = name.partition(":")
        return _PROVIDERS.get(prefix, prefix) if colon else "pydantic_ai"
    given = getattr(model, "provider_name", None)
    return given if isinstance(given, str) and given else kind.lower()


def model_of(model: Any) -> str | None:
    """``gen_ai.request.model`` for a chat model, when it names one."""
    if model is None:
        return None
    kind = type(model).__name__
    if kind == "ScriptedModel":
        return "scripted"
    if kind == "PydanticAIModel":
        name = str(getattr(model, "name", ""))
        return name.partition(":")[2] or name or None
    for attr in ("model", "model_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _parts(message: Any) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    content = getattr(message, "content", "")
    role = getattr(message, "role", "user")
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": getattr(message, "tool_call_id", None),
                      "response": content})  # fmt: skip
    elif content:
        parts.append({"type": "text", "content": content})
    for call in getattr(message, "tool_calls", None) or ():
        parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": call.args})  # fmt: skip
    return {"role": role, "parts": parts}


def messages_json(messages: Any) -> str:
    """Chat messages as the conventions' ``gen_ai.input.messages`` JSON."""
    return json.dumps([_parts(m) for m in messages], ensure_ascii=False, default=str)


def output_json(content: str, tool_calls: Any) -> str:
    """A model reply as the conventions' ``gen_ai.output.messages`` JSON."""
    out = _parts(type("Reply", (), {"content": content, "role": "assistant",
                                    "tool_calls": tool_calls})())  # fmt: skip
    out["finish_reason"] = "tool_call" if tool_calls else "stop"
    return json.dumps([out], ensure_ascii=False, default=str)
