"""A one-shot CLI command's span export at exit is bounded (R60: ≤ 2 s): with the
collector down (a port nobody listens on) or blackholed (it accepts the connection and
never answers), ``python -m intermission demo`` / ``pending`` end in about the time they
take untraced, not after the exporter's 10 s of retries; with a collector up, every span
still arrives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module
from tests.otel._collector import collector, dead_port, silent_collector

REPO = Path(__file__).resolve().parents[2]


def _cli(
    args: list[str], endpoint: str | None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a command traced to ``endpoint`` (None: untraced); its wall time."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("INTERMISSION_OTEL", None)
    if endpoint is not None:
        env.update(INTERMISSION_OTEL="1", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint)
    env.pop("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", None)
    env.pop("OTEL_EXPORTER_OTLP_TIMEOUT", None)
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        env=env, capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    return done, time.monotonic() - began


@contextmanager
def _endpoint(kind: str) -> Iterator[str]:
    if kind == "down":
        with nullcontext(dead_port()) as url:
            yield url
    else:
        with silent_collector() as url:
            yield url


def test_the_exit_timeouts_are_at_most_two_seconds() -> None:
    from intermission.otel.env import EXIT_TIMEOUT_S, EXPORT_TIMEOUT_S

    assert 0 < EXPORT_TIMEOUT_S < EXIT_TIMEOUT_S <= 2.0


@pytest.mark.parametrize("kind", ["down", "silent"])
def test_a_one_shot_command_does_not_wait_for_a_collector_that_is_not_there(
    kind: str, tmp_path: Path
) -> None:
    need_module("opentelemetry.exporter.otlp.proto.http", "the otlp extra")
    store = str(tmp_path / "demo.db")
    untraced, untraced_s = _cli(["demo", "--store", str(tmp_path / "untraced.db")], None)
    assert untraced.returncode == 0, untraced.stderr
    with _endpoint(kind) as url:
        # demo pauses a session: it has spans to export (before: ~7 s down, ~12 s silent)
        demo, demo_s = _cli(["demo", "--store", store], url)
        # the faster of two runs: one run slowed by a busy machine (seen: 8.4 s against 3.6
        # untraced, on CI with three test workers on two cores) is not a wait
        runs = [_cli(["pending", "--store", store], url) for _ in range(2)]
    alone, alone_s = _cli(["pending", "--store", store], None)
    assert demo.returncode == 0, demo.stderr
    for pending, _ in runs:
        assert pending.returncode == 0 and "change-001" in pending.stdout, pending.stderr
    assert alone.returncode == 0, alone.stderr
    pending_s = min(s for _, s in runs)
    # generous bounds on a loaded machine: the exporter gives up after 1.5 s and the exit
    # waits 2 s at most, over what the same command takes untraced (before: 6.5 s, 11 s)
    waited = demo_s - untraced_s
    assert waited < 4.0, f"demo waited {waited:.1f} s more with the collector {kind}"
    assert pending_s < alone_s + 4.0, f"pending: {pending_s:.1f} s ({kind}), {alone_s:.1f} untraced"


def test_a_one_shot_command_still_exports_its_spans_to_a_collector_that_is_up(
    tmp_path: Path,
) -> None:
    need_module("opentelemetry.exporter.otlp.proto.http", "the otlp extra")
    with collector() as received:
        demo, _ = _cli(["demo", "--store", str(tmp_path / "demo.db")], received.url)
        spans: list[dict[str, Any]] = received.spans()
    assert demo.returncode == 0, demo.stderr
    (root,) = [s for s in spans if s["parent"] is None and s["name"].startswith("invoke_")]
    assert [e["name"] for e in root["events"]].count("intermission.pause") == 1
