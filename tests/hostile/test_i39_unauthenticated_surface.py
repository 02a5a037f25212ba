"""Issue 39 (R60), attacked: on a ``serve`` started WITHOUT ``--auth``, a decision whose
client names nobody still records the surface it came through.

Before: an AG-UI resume and a console click (``metadata.via = "console"``) without a
reviewer name were both recorded ``via=None`` (a graph approval's even ``via="system"``,
as if the deadline had decided), so the trail could not tell them apart. Now each is
recorded with its surface (``agui`` / ``console``), unauthenticated, naming nobody.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, pg_dsn
from tests.agui._server import Server
from tests.agui.test_server import interrupts_of, resume, start

from intermission.stores import open_store


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    fresh_pg().close()
    return pg_dsn()


def decide(server: Server, agent: str, thread: str, via: str | None) -> None:
    (interrupt,) = interrupts_of(start(server, agent, thread, "delete user 42"))
    body = resume([interrupt["id"]], {"approved": True})
    if via is not None:
        body[0]["metadata"] = {"via": via}
    server.run(agent, {"threadId": thread, "runId": "r2", "resume": body})


def recorded(where: str, thread: str) -> Any:
    store = open_store(where)
    try:
        return [r for r in store.audit(thread) if r.action in ("decision.recorded",
                                                               "approval.recorded")]  # fmt: skip
    finally:
        store.close()


def test_without_auth_an_agui_and_a_console_decision_name_their_surface(
    where: str, tmp_path: Path
) -> None:
    server = Server(where, tmp_path / "effects.log")
    try:
        decide(server, "ops", "t-agui", None)
        decide(server, "ops", "t-console", "console")
        decide(server, "change", "g-agui", None)
        decide(server, "change", "g-console", "console")
    finally:
        server.stop()
    for thread, via in (("t-agui", "agui"), ("t-console", "console"),
                        ("g-agui", "agui"), ("g-console", "console")):  # fmt: skip
        (record,) = recorded(where, thread)
        assert (record.actor, record.via, record.authenticated) == (None, via, False), thread
