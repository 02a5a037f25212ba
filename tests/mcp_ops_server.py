"""A real MCP server (the official SDK's MCPServer) for the tests: user tools with and
without annotations, one that fails and one that is slow. Every call is counted in the
JSON file named by ``MCP_COUNT_FILE`` (so a test can tell how often a tool really ran).

    python tests/mcp_ops_server.py                 # stdio
    python tests/mcp_ops_server.py http PORT       # streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("ops")
COUNT_FILE = os.environ.get("MCP_COUNT_FILE", "")


def count(name: str) -> None:
    if not COUNT_FILE:
        return
    with open(COUNT_FILE, "a+") as f:  # one line per call, appended under a lock
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"tool": name, "pid": os.getpid()}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, title="Look up a user"))
def get_user(user_id: int) -> str:
    """Look up a user account by id."""
    count("get_user")
    return f"user {user_id}: alice (active)"


@server.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=False))
def delete_user(user_id: int) -> str:
    """Delete a user account."""
    count("delete_user")
    return f"user {user_id} deleted"


@server.tool()
def rename_user(user_id: int, name: str) -> str:
    """Rename a user (no annotations: the MCP defaults say it may be destructive)."""
    count("rename_user")
    return f"user {user_id} renamed to {name}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def add_note(user_id: int, note: str) -> str:
    """Add a note to a user (changes things, but destroys nothing)."""
    count("add_note")
    return f"note added to {user_id}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def failing_lookup(user_id: int) -> str:
    """A lookup that always fails on the server."""
    count("failing_lookup")
    raise ValueError(f"user {user_id} is locked")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def slow_delete(user_id: int, seconds: float = 2.0) -> str:
    """Delete slowly (a tool still running when something goes wrong)."""
    count("slow_delete")
    time.sleep(seconds)
    return f"user {user_id} deleted slowly"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
