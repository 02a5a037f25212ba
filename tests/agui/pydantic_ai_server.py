"""pydantic-ai's own AG-UI adapter serving the same scripted tool approval as our ``ops``
agent (``FunctionModel``): the other side of the differential check.
``python tests/agui/pydantic_ai_server.py PORT``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def _returned(messages: list[ModelMessage]) -> str | None:
    for part in getattr(messages[-1], "parts", []):
        if isinstance(part, ToolReturnPart):
            return str(part.content)
    return None


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    done = _returned(messages)
    if done is not None:
        return ModelResponse(parts=[TextPart(f"Done: {done}.")])
    return ModelResponse(parts=[ToolCallPart("delete_user", {"user_id": 1001})])


async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    done = _returned(messages)
    if done is not None:
        text = f"Done: {done}."
        for i in range(0, len(text), 16):
            yield text[i : i + 16]
        return
    yield {0: DeltaToolCall(name="delete_user", json_args='{"user_id": 1001}')}


agent: Agent[None, str | DeferredToolRequests] = Agent(
    FunctionModel(reply, stream_function=stream), output_type=[str, DeferredToolRequests]
)


@agent.tool_plain(requires_approval=True)
def delete_user(user_id: int) -> str:
    """Delete a user account (irreversible)."""
    return f"user {user_id} deleted"


async def run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


app = Starlette(routes=[Route("/agents/ops", run, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
