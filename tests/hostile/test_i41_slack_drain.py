"""A Slack click resumes a run (it runs the approved tool) beside the AG-UI runs: it was
neither refused once the server's stop began nor waited for by the drain, so a SIGTERM
could cut a tool mid-way while Slack told the person it was approved (issue 41,
attacked). Now a click once the stop began decides nothing and says so, and a decision in
flight is waited for by the drain, as a run is."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx (extra notify)")
need_module("uvicorn", "uvicorn (extra agui)")

import tests.slack._slack as slack_world  # noqa: E402

from intermission.slack import interactions  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, monkeypatch: Any) -> Iterator[tuple[slack_world.World, Any]]:
    monkeypatch.setenv("AGUI_EFFECTS", str(tmp_path / "effects"))
    made: list[Any] = []
    real = slack_world.agui_app

    def keep(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(slack_world, "agui_app", keep)
    w = slack_world.World(SQLiteStore(tmp_path / "s.db", outbox=True), tmp_path)
    try:
        yield w, made[0]
    finally:
        w.stop()


def test_a_click_once_the_stop_began_decides_nothing(world: Any, tmp_path: Path) -> None:
    w, app = world
    w.pause("ops", "D")
    value = w.buttons("D")["approve"]["value"]
    app.stop()
    r = w.click("U-ANN", "approve", value)
    assert r.status_code == 200 and "stopping" in r.json()["text"], r.text
    assert not (tmp_path / "effects").exists() and w.store.load("D").status == "pending"
    assert [e.action for e in w.store.audit("D")] == ["task.opened"]


def test_the_drain_waits_for_a_decision_in_flight(world: Any, monkeypatch: Any) -> None:
    w, app = world
    w.pause("ops", "F")
    value = w.buttons("F")["approve"]["value"]
    go, started = threading.Event(), threading.Event()
    real = interactions.SlackInteractions._decide

    def held(self: Any, *args: Any) -> str:
        started.set()
        go.wait(60)
        return real(self, *args)

    monkeypatch.setattr(interactions.SlackInteractions, "_decide", held)
    monkeypatch.setattr(interactions, "answer_within_s", 0.0)  # answered at once
    assert "being recorded" in w.click("U-ANN", "approve", value).json()["text"]
    assert started.wait(30)
    app.stop()
    threading.Timer(0.3, go.set).start()
    assert app.drain() == []  # (nothing given up: it waited for the decision)
    assert w.store.load("F").status == "done"
