"""``serve --notify FILE``: the dispatcher runs inside the server for its lifespan — a pause
made over AG-UI reaches the receiver, linking to this server's console page for that
interrupt; SIGTERM stops the loop with the server."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

from tests._helpers import need_module
from tests.notify._receivers import SECRET, Receiver, Served, wait_until

from intermission.stores import SQLiteStore


def test_serve_notify_tells_the_receiver_of_a_pause_made_over_agui(tmp_path: Path) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    need_module("httpx", "httpx (extra notify)")
    receiver = Receiver()
    config = tmp_path / "notify.yaml"
    config.write_text(
        textwrap.dedent(f"""
        poll_s: 30
        targets:
          - {{type: webhook, url: "{receiver.url}/hook", secret_env: IM_HOOK_SECRET}}
    """)
    )
    db = tmp_path / "s.db"
    server = Served(str(db), config, tmp_path / "serve.log", {"IM_HOOK_SECRET": SECRET})
    try:
        finished = server.pause("ticket-7")
        (interrupt,) = finished["outcome"]["interrupts"]
        # woken by the save, not by the poll (30 s): it arrives as soon as it committed
        wait_until(lambda: receiver.total() == 1, timeout_s=25, what="the notification")
        (body,) = receiver.bodies
        assert body["session"]["id"] == "ticket-7" and body["kind"] == "pending"
        assert body["interrupts"][0]["id"] == interrupt["id"]
        assert body["link"] == f"{server.url}/#thread=ticket-7&interrupt={interrupt['id']}"
        assert SQLiteStore(db).outbox.enabled  # serve --notify turned the outbox on
    finally:
        code = server.stop()
        receiver.stop()
    # a graceful stop (uvicorn re-raises the SIGTERM it handled once it shut down)
    assert code in (0, -signal.SIGTERM), server.log.read_text()
    assert "notifications go to webhook-" in server.log.read_text()
    assert SECRET not in server.log.read_text() and receiver.url not in server.log.read_text()
