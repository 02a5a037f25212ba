"""``serve`` stopped by SIGTERM with tracing on (issue 39, attacked): uvicorn raised SIGTERM
again once stopped, and its default action killed the process before any exit handler ran,
so the spans of the last seconds never reached a collector that was up; and the flush at
exit, once it ran, waited the exporter's 10 s for a collector that was down. Now the spans
arrive, and a dead collector holds the exit no more than a one-shot command's."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._helpers import need_module
from tests.otel._collector import collector, silent_collector

need_module("httpx", "httpx")
need_module("opentelemetry.exporter.otlp.proto.http", "the otlp extra")

from tests.agui._server import Server  # noqa: E402

GO = [{"id": "u", "role": "user", "content": "go"}]


def _traced_server(tmp_path: Path, endpoint: str) -> Server:
    env = {"INTERMISSION_OTEL": "1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}
    return Server(str(tmp_path / "s.db"), tmp_path / "effects.log", env=env)


@pytest.fixture
def stopped() -> Iterator[list[Server]]:
    servers: list[Server] = []
    yield servers
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=60)


def test_spans_made_just_before_sigterm_reach_the_collector(
    tmp_path: Path, stopped: list[Server]
) -> None:
    with collector() as received:
        server = _traced_server(tmp_path, received.url)
        stopped.append(server)
        events = server.run("ops", {"threadId": "t-term", "runId": "r1", "messages": GO})
        assert events[-1][1]["outcome"]["type"] == "interrupt"
        # at once: the batch exporter holds them for 5 s before it sends them on its own
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
        spans = received.spans()
    assert any(s["name"].startswith("invoke_") for s in spans), spans
    assert code == 0  # a graceful stop: exit handlers ran (the flush among them)


def test_a_dead_collector_holds_the_exit_after_sigterm_at_most_a_few_seconds(
    tmp_path: Path, stopped: list[Server]
) -> None:
    with silent_collector() as url:
        server = _traced_server(tmp_path, url)
        stopped.append(server)
        server.run("ops", {"threadId": "t-dead", "runId": "r1", "messages": GO})
        began = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
        waited = time.monotonic() - began
    # the flush at exit waits 2 s at most (before: the exporter's 10 s and more)
    assert waited < 6.0, f"serve took {waited:.1f} s to exit with the collector silent"
    assert code == 0
