"""Agents: models (scripted, OpenAI-compatible, any pydantic-ai model), tools (Python
functions, MCP servers), interceptors, the ReAct loop and teams."""

from .interceptors import ReActInterceptor, ToolExchange
from .mcp_client import MCPConnection, MCPTool, MCPTools, mcp_tools
from .models import ChatModel, ModelChunk, ToolSchema
from .openai_compat import OpenAIChatModel
from .pydantic_ai_model import PydanticAIModel
from .react import ReActAgent, ReActAgentBuilder
from .request import AgentRequest, AgentResponse, EventStream
from .scripted import ScriptedModel
from .table import AgentTable
from .team import TeamAgent, TeamAgentBuilder, TeamResponse
from .tools import Tool, tool

__all__ = [
    "AgentRequest",
    "AgentTable",
    "AgentResponse",
    "ChatModel",
    "EventStream",
    "MCPConnection",
    "MCPTool",
    "MCPTools",
    "ModelChunk",
    "OpenAIChatModel",
    "PydanticAIModel",
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
    "mcp_tools",
    "tool",
]
