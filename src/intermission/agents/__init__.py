"""Agents: models, tools, interceptors, the ReAct loop and teams."""

from .interceptors import ReActInterceptor, ToolExchange
from .models import ChatModel, ModelChunk, ToolSchema
from .openai_compat import OpenAIChatModel
from .react import ReActAgent, ReActAgentBuilder
from .request import AgentRequest, AgentResponse, EventStream
from .scripted import ScriptedModel
from .team import TeamAgent, TeamAgentBuilder, TeamResponse
from .tools import Tool, tool

__all__ = [
    "AgentRequest",
    "AgentResponse",
    "ChatModel",
    "EventStream",
    "ModelChunk",
    "OpenAIChatModel",
    "ReActAgent",
    "ReActAgentBuilder",
    "ReActInterceptor",
    "ScriptedModel",
    "TeamAgent",
    "TeamAgentBuilder",
    "TeamResponse",
    "Tool",
    "ToolExchange",
    "ToolSchema",
    "tool",
]
