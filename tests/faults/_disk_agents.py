"""An agent whose approved tool fills the disk the store lives on (``$IM_FILL_DIR``), for the
CLI's ``--agents tests.faults._disk_agents:AGENTS``: the save that ends its resume then
finds no space."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from intermission import HITLInterceptor, ReActAgent, ScriptedModel, ToolCall, tool


def fill(folder: Path) -> Path:
    """Write ``folder/filler`` until the filesystem has no space left; returns its path."""
    path = folder / "filler"
    with path.open("ab", buffering=0) as f:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                continue
    return path


def ops_agent() -> Any:
    """Asks before ``archive``, which fills the disk when it runs."""

    @tool
    def archive(name: str) -> str:
        """Archive a dataset (takes the disk's last free space)."""
        fill(Path(os.environ["IM_FILL_DIR"]))
        return f"archived {name}"

    def script(messages: list[Any], tools: Any) -> Any:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last_user:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("archive", {"name": "orders"})]

    return (
        ReActAgent.of(ScriptedModel(script))
        .name("ops")
        .tools(archive)
        .interceptor(HITLInterceptor().on_tool("archive"))
        .build()
    )


AGENTS: dict[str, Any] = {"ops": ops_agent}
