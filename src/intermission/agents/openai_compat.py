"""A chat model for any server speaking the OpenAI Chat Completions protocol (extra
``openai``): OpenAI, vLLM, llama.cpp server, Ollama… Streaming and tool calls (R15)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from .._compat import require
from .._ids import RANDOM_IDS, IdFactory
from ..errors import ModelCallError, ModelError
from ..messages import ChatMessage, ToolCall
from .models import ModelChunk, ToolSchema

__all__ = ["OpenAIChatModel"]


def _wire(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args)},
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def _args(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        raise ModelError(f"tool call {name!r}: arguments are not JSON: {text[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ModelError(f"tool call {name!r}: arguments are not a JSON object")
    return value


def _status_error(status: int, url: str, body: str) -> ModelCallError:
    """An error status as a typed error: 429 and 5xx are worth retrying, other 4xx not."""
    return ModelCallError(
        f"HTTP {status} from {url}: {body[:300]}",
        status=status,
        retryable=status == 429 or status >= 500,
    )


def _usage(body: Any) -> dict[str, int] | None:
    """A Chat Completions body's token counts (``usage``), when it has them."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = {
        mine: value
        for mine, theirs in (("input_tokens", "prompt_tokens"), ("output_tokens",
                                                                 "completion_tokens"))
        if isinstance(value := usage.get(theirs), int) and not isinstance(value, bool)
    }  # fmt: skip
    return counts or None


class OpenAIChatModel:
    """A chat model that calls an OpenAI-compatible Chat Completions API.

    ``model``, ``base_url`` and ``api_key`` default to ``OPENAI_MODEL``, ``OPENAI_BASE_URL``
    (else the OpenAI API) and ``OPENAI_API_KEY``. Needs the ``openai`` extra (httpx):
    without it, making the model raises MissingDependencyError. Failures are ModelCallErrors
    with the HTTP status; a ReAct agent retries the transient ones (see
    ``ReActAgentBuilder.retry_config``)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeout: float = 60.0,
        ids: IdFactory | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.model = model or os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        ).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.streaming = stream
        self.timeout = timeout
        self.ids = ids or RANDOM_IDS
        self.extra_body = dict(extra_body or {})
        require("httpx", "openai")  # a missing extra is an error now, not a model reply

    def _payload(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire(m) for m in messages],
            "stream": self.streaming,
            **self.extra_body,
        }
        if tools:
            payload["tools"] = [{"type": "function", "function": t} for t in tools]
        return payload

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSchema]
    ) -> AsyncIterator[ModelChunk]:
        """Stream the reply (or fetch it whole when ``stream=False``)."""
        httpx = require("httpx", "openai")
        try:
            # closed here, on this loop: a generator left to the garbage collector is
            # closed by a task the loop may never run ("Task was destroyed" at exit)
            async with aclosing(self._stream(httpx, messages, tools)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except httpx.TransportError as exc:  # refused, reset, timed out: worth retrying
            raise ModelCallError(
                f"{type(exc).__name__} from {self.base_url}: {exc}", retryable=True
            ) from exc

    async def _stream(
        self, httpx: Any, messages: list[ChatMessage], tools: list[ToolSchema]
    ) -> AsyncGenerator[ModelChunk, None]:
        url = f"{self.base_url}/chat/completions"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        payload = self._payload(messages, tools)
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            if not self.streaming:
                resp = await client.post(url, json=payload, headers=headers)
                if resp.status_code >= 400:
                    raise _status_error(resp.status_code, url, resp.text)
                body = resp.json()
                message = body["choices"][0]["message"]
                calls = [
                    ToolCall(
                        c["function"]["name"],
                        _args(c["function"].get("arguments", ""), c["function"]["name"]),
                        c.get("id") or self.ids("call"),
                    )
                    for c in message.get("tool_calls") or []
                ]
                yield ModelChunk(
                    text=message.get("content") or "", tool_calls=calls, usage=_usage(body)
                )
                return
            partial: dict[int, dict[str, str]] = {}
            usage: dict[str, int] | None = None
            async with client.stream("POST", url, json=payload, headers=headers) as resp:
                if resp.status_code >= 400:
                    body = (await resp.aread()).decode(errors="replace")
                    raise _status_error(resp.status_code, url, body)
                done = False
                # read to the body's end, [DONE] included: an iterator of httpx's left
                # early leaves its inner ones to the garbage collector, whose close task
                # the loop never runs ("Task was destroyed but it is pending!" at exit)
                async with aclosing(resp.aiter_lines()) as lines:
                    async for line in lines:
                        if done or not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            done = True
                            continue
                        chunk = json.loads(data)
                        usage = _usage(chunk) or usage  # (sent when stream_options ask for it)
                        choices = chunk.get("choices") or []
                        if not choices:
                            continue
                        delta = choices[0].get("delta") or {}
                        if delta.get("content"):
                            yield ModelChunk(text=delta["content"])
                        for tc in delta.get("tool_calls") or []:
                            slot = partial.setdefault(
                                tc.get("index", 0), {"id": "", "name": "", "args": ""}
                            )
                            slot["id"] = tc.get("id") or slot["id"]
                            fn = tc.get("function") or {}
                            slot["name"] += fn.get("name") or ""
                            slot["args"] += fn.get("arguments") or ""
            if partial or usage:
                yield ModelChunk(
                    tool_calls=[
                        ToolCall(
                            s["name"], _args(s["args"], s["name"]), s["id"] or self.ids("call")
                        )
                        for _, s in sorted(partial.items())
                    ],
                    usage=usage,
                )

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"
