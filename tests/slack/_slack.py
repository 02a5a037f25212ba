"""A world for Slack tests: the AG-UI server (uvicorn, a free port) with
``/slack/interactions``, a store with its outbox on, a notifier whose interactive Slack
target posts to a local stand-in for Slack, and clicks signed exactly as Slack documents
(https://api.slack.com/authentication/verifying-requests-from-slack)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from tests.agui._server import parse_sse
from tests.notify._receivers import Served, free_port, wait_until

from intermission import AgentTable, Principal
from intermission.agui import agui_app
from intermission.agui.auth import TokenAuth
from intermission.identity import IdentityMap
from intermission.notify import Notifier, SlackWebhook
from intermission.slack.interactions import SlackInteractions

from .agents import AGENTS

if TYPE_CHECKING:
    import httpx

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PEOPLE = {"ann": {"sre"}, "ben": {"sre"}, "cid": {"dev"}}
SLACK_USERS = {"U-ANN": "ann", "U-BEN": "ben", "U-CID": "cid"}
TOKENS = {f"t-{name}": Principal(name, roles) for name, roles in PEOPLE.items()}


class StandIn:
    """Slack's side: takes the messages the target posts (``/webhook``) and the updates
    and ephemeral answers sent to each click's ``response_url`` (``/respond/<n>``).
    ``fail[path] = k``: the next k requests to that path get a 500."""

    def __init__(self) -> None:
        self.got: dict[str, list[dict[str, Any]]] = {}
        self.fail: dict[str, int] = {}
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with stand_in.lock:
                    if stand_in.fail.get(self.path, 0) > 0:
                        stand_in.fail[self.path] -= 1
                        status = 500
                    else:
                        stand_in.got.setdefault(self.path, []).append(json.loads(body))
                        status = 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def at(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.got.get(path, []))

    def updates(self, path: str) -> list[dict[str, Any]]:
        """What replaced the clicked message (not the ephemeral answers)."""
        return [m for m in self.at(path) if m.get("replace_original") is True]

    def ephemeral(self, path: str) -> list[str]:
        return [m["text"] for m in self.at(path) if m.get("response_type") == "ephemeral"]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signed(body: bytes, timestamp: int, secret: str = SECRET) -> dict[str, str]:
    """Headers as Slack sends them: ``v0=`` HMAC-SHA256 of ``v0:{ts}:{body}``."""
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}


def click_body(user: str, action: str, value: str, response_url: str) -> bytes:
    """A button click's form body as Slack posts it (``payload=`` JSON)."""
    payload = {
        "type": "block_actions", "user": {"id": user, "username": user.lower()},
        "team": {"id": "T1"}, "response_url": response_url,
        "actions": [{"type": "button", "action_id": action, "block_id": "decide-0",
                     "value": value, "action_ts": str(time.time())}],
    }  # fmt: skip
    return urlencode({"payload": json.dumps(payload)}).encode()


def button(message: dict[str, Any], action: str) -> str:
    """The ``value`` of a message's button (``approve``, ``reject``, ``open``)."""
    (value,) = [e["value"] for b in message["blocks"] if b["type"] == "actions"
                for e in b["elements"] if e["action_id"] == action]  # fmt: skip
    return str(value)


def ran(effects: Path) -> list[str]:
    """The effects the test agents ran (``AGUI_EFFECTS``), one line each."""
    return effects.read_text().splitlines() if effects.exists() else []


SERVE_TOKEN = "t-cid-0123456789"
"""The bearer of the AG-UI client (cid) of :func:`serve_slack`."""


def serve_slack(tmp: Path, slack: StandIn, effects: Path) -> Served:
    """``python -m intermission serve --notify --auth`` (a subprocess) with one interactive
    Slack target posting to ``slack``; ann is ``U-ANN`` in Slack, cid calls with
    :data:`SERVE_TOKEN`."""
    import hashlib
    import textwrap

    config = tmp / "notify.yaml"
    config.write_text(textwrap.dedent(f"""
        poll_s: 0.2
        retry_first_s: 0.05
        targets:
          - type: slack
            name: team
            url: "{slack.url}/webhook"
            interactive: true
            signing_secret_env: IM_SLACK_SIGNING
    """))  # fmt: skip
    auth = tmp / "auth.yaml"
    auth.write_text(json.dumps({
        "principals": {"ann": {"roles": ["sre"]}, "cid": {"roles": ["dev"]}},
        "tokens": [{"hash": "sha256:" + hashlib.sha256(SERVE_TOKEN.encode()).hexdigest(),
                    "name": "cid"}],
        "slack_users": {"U-ANN": "ann"},
    }))  # fmt: skip
    return Served(str(tmp / "s.db"), config, tmp / "serve.log",
                  {"IM_SLACK_SIGNING": SECRET, "AGUI_EFFECTS": str(effects)},
                  "--auth", str(auth))  # fmt: skip


def pause_served(server: Served, slack: StandIn, thread: str = "S1") -> dict[str, Any]:
    """cid's run on ``server`` that pauses for an approval; the message Slack got."""
    import httpx

    body = {"threadId": thread, "runId": "r1", "state": {}, "tools": [], "context": [],
            "forwardedProps": {},
            "messages": [{"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
    r = httpx.post(f"{server.url}/agents/ops", json=body, timeout=120,
                   headers={"Authorization": f"Bearer {SERVE_TOKEN}"})  # fmt: skip
    assert r.status_code == 200, r.text
    wait_until(lambda: bool(slack.at("/webhook")), 30, "the message")
    (message,) = slack.at("/webhook")
    return message


@contextmanager
def world_of(store: Any, tmp: Path, monkeypatch: Any,
             more_targets: tuple[str, ...] = ()) -> Iterator[World]:  # fmt: skip
    """A :class:`World` on ``store`` whose agents note their effects in
    ``tmp/effects`` (read them with ``ran(tmp / "effects")``); stopped after."""
    monkeypatch.setenv("AGUI_EFFECTS", str(tmp / "effects"))
    w = World(store, tmp, more_targets)
    try:
        yield w
    finally:
        w.stop()


class World:
    """The server, its store, the notifier and the stand-in."""

    def __init__(self, store: Any, tmp: Path, more_targets: tuple[str, ...] = ()) -> None:
        import httpx
        import uvicorn

        self.store = store
        self.slack = StandIn()
        self.identity = IdentityMap(
            {n: Principal(n, r) for n, r in PEOPLE.items()}, slack_users=SLACK_USERS)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.target = SlackWebhook(f"{self.slack.url}/webhook", name="slack", interactive=True,
                                   signing_secret=SECRET)  # fmt: skip
        # (``more_targets``: other webhooks of the same Slack app, one secret for all)
        names = ("slack", *more_targets)
        origins = dict.fromkeys(names, self.target.reply_origins)
        clicks = SlackInteractions(store, AgentTable(AGENTS), self.identity,
                                   dict.fromkeys(names, SECRET), origins=origins)  # fmt: skip
        app = agui_app(AGENTS, store, auth=TokenAuth(TOKENS),
                       signed_routes={"/slack/interactions": clicks})  # fmt: skip
        self.notifier = Notifier(store, [self.target], self.url, retry_first_s=0.01,
                                 retry_max_s=0.01)  # fmt: skip
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                lifespan="off")  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, 30, "the server")
        self.http = httpx.Client(base_url=self.url, timeout=60)
        self.clicks = 0

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.notifier.close()
        self.http.close()
        self.slack.stop()

    # -- AG-UI -----------------------------------------------------------------------------
    def run(self, token: str, agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        r = self.http.post(f"/agents/{agent}", json=body,
                           headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 200, r.text
        return [e for _, e in parse_sse(r.text)]

    def pause(self, agent: str, thread: str, token: str = "t-cid") -> str:
        """A run (asked by ``token``'s person) that stops on one interrupt; its id."""
        events = self.run(token, agent, {"threadId": thread, "runId": "r0", "messages": [
            {"id": "u0", "role": "user", "content": "go"}]})  # fmt: skip
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        return str(interrupt["id"])

    def console_approve(self, token: str, agent: str, thread: str, iid: str) -> Any:
        return self.run(token, agent, {"threadId": thread, "runId": f"c-{token}",
                                       "messages": [], "resume": [
            {"interruptId": iid, "status": "resolved", "payload": {"approved": True},
             "metadata": {"via": "console"}}]})  # fmt: skip

    # -- Slack -----------------------------------------------------------------------------
    def message(self, thread: str) -> dict[str, Any]:
        """The interactive message the notifier posted for ``thread``'s pause."""
        self.notifier.deliver_pending()
        found = [m for m in self.slack.at("/webhook") if f"`{thread}`" in json.dumps(m)]
        assert found, self.slack.at("/webhook")
        return found[-1]

    def buttons(self, thread: str) -> dict[str, dict[str, Any]]:
        """The message's buttons by action id."""
        out = {}
        for block in self.message(thread)["blocks"]:
            if block["type"] == "actions":
                out.update({e["action_id"]: e for e in block["elements"]})
        return out

    def body(self, user: str, action: str, value: str, respond: str) -> bytes:
        return click_body(user, action, value, f"{self.slack.url}{respond}")

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return self.http.post("/slack/interactions", content=body, headers=headers)

    def click(self, user: str, action: str, value: str, respond: str = "/respond/1",
              *, at: int | None = None) -> httpx.Response:  # fmt: skip
        """A click as Slack sends it, signed now (or at ``at``)."""
        body = self.body(user, action, value, respond)
        return self.post(body, signed(body, int(time.time()) if at is None else at))
