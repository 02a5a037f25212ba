"""The world of tests/hitl/test_approvals_hold_on_every_path.py and its siblings: one store
(a SQLite file or the PostgreSQL test database) shared by the test's process, the CLI as
subprocesses and one ``serve`` subprocess, all running the agents of
tests/hitl/_paths_agents.py, whose tools append what ran to one file."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests._helpers import fresh_pg, need_module, pg_dsn
from tests.hitl._paths_agents import AGENTS

from intermission.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.hitl._paths_agents:AGENTS"


@dataclass
class World:
    """One store (a SQLite file or the PostgreSQL test database) shared by this process,
    the CLI's subprocesses and one ``serve`` subprocess; the tools' record of what ran."""

    kind: str
    url: str
    store: Any
    effects: Path
    tmp: Path
    server: Any = None

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
               "IM_EFFECT_FILE": str(self.effects)}  # fmt: skip
        return subprocess.run(
            [sys.executable, "-m", "intermission", "--agents", MODULE, *args,
             "--store", self.url],
            capture_output=True, text=True, cwd=self.tmp, env=env, timeout=180,
        )  # fmt: skip

    def serve(self) -> Any:
        """The ``serve`` subprocess on this store (started on first use, no sweeper)."""
        if self.server is None:
            need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
            need_module("httpx", "httpx")
            from tests.agui._server import Server

            self.server = Server(self.url, self.tmp / "agui-effects", agents=MODULE,
                                 extra=("--sweep-every", "0"),
                                 env={"IM_EFFECT_FILE": str(self.effects)})  # fmt: skip
        return self.server

    def agui(self, agent: str, sid: str, payloads: dict[str, dict[str, Any]],
             via: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Resume ``sid`` over AG-UI with ``{interrupt id: payload}``; the last event."""
        meta = {"via": via} if via else {}
        resume = [{"interruptId": iid, "status": "resolved", "payload": p, "metadata": meta}
                  for iid, p in payloads.items()]  # fmt: skip
        events = self.serve().run(
            agent, {"threadId": sid, "runId": f"r-{uuid.uuid4().hex[:8]}", "resume": resume}
        )
        return events[-1][1]


@contextlib.contextmanager
def open_world(kind: str, tmp: Path) -> Iterator[World]:
    """A world on a fresh store of ``kind`` (``sqlite`` or ``postgres``); the tools of this
    process write to its file too while it is open."""
    effects = tmp / "effects"
    if kind == "sqlite":
        url = str(tmp / "paths.sqlite")
        store: Any = SQLiteStore(url)
    else:
        url = pg_dsn()
        store = fresh_pg()
    saved = os.environ.get("IM_EFFECT_FILE")
    os.environ["IM_EFFECT_FILE"] = str(effects)
    w = World(kind, url, store, effects, tmp)
    try:
        yield w
    finally:
        if w.server is not None:
            w.server.stop()
        store.close()
        if saved is None:
            os.environ.pop("IM_EFFECT_FILE", None)
        else:
            os.environ["IM_EFFECT_FILE"] = saved


def agent_of(name: str) -> Any:
    """A fresh instance of the agent ``name`` of tests/hitl/_paths_agents.py."""
    return AGENTS[name]()
