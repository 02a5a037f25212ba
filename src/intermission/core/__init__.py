"""The runtime core: graphs, the flow engine, contexts, sessions and snapshots."""

from .context import FlowContext
from .engine import FlowEngine, FlowInterceptor, FlowResult, FlowStatus
from .events_log import EventLog, RunScope
from .graph import Graph, Link, Node
from .history import Checkpoint
from .ledger import LedgerEntry
from .registry import Registry
from .session import AgentSession, InMemoryAgentSession
from .session_status import SessionStatus
from .snapshot import SessionSnapshot
from .spec import END, START, GraphSpec, LinkSpec, MemberAgent, NodeSpec
from .state import FlowTrace, GraphRun

__all__ = [
    "END",
    "START",
    "AgentSession",
    "Checkpoint",
    "EventLog",
    "FlowContext",
    "FlowEngine",
    "FlowInterceptor",
    "FlowResult",
    "FlowStatus",
    "FlowTrace",
    "Graph",
    "GraphRun",
    "GraphSpec",
    "InMemoryAgentSession",
    "LedgerEntry",
    "Link",
    "LinkSpec",
    "MemberAgent",
    "Node",
    "NodeSpec",
    "Registry",
    "RunScope",
    "SessionSnapshot",
    "SessionStatus",
]
