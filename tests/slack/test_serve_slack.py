"""``serve --notify FILE --auth FILE`` with an interactive Slack target: the message the
server sends carries buttons, ``POST /slack/interactions`` takes a click signed as Slack
signs it (no bearer token: the signature is its authentication), and the message is
updated with the outcome; a config with a signing secret written inline is refused."""

from __future__ import annotations

import hashlib
import json
import signal
import textwrap
import time
from pathlib import Path

from tests._helpers import need_module
from tests.notify._receivers import Served, wait_until

from ._slack import SECRET, StandIn, signed


def test_serve_takes_a_signed_click_and_updates_the_message(tmp_path: Path) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    need_module("httpx", "httpx (extra notify)")
    import httpx

    slack = StandIn()
    config = tmp_path / "notify.yaml"
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
    token = "t-cid-0123456789"
    auth = tmp_path / "auth.yaml"
    auth.write_text(json.dumps({
        "principals": {"ann": {"roles": ["sre"]}, "cid": {"roles": ["dev"]}},
        "tokens": [{"hash": "sha256:" + hashlib.sha256(token.encode()).hexdigest(),
                    "name": "cid"}],
        "slack_users": {"U-ANN": "ann"},
    }))  # fmt: skip
    server = Served(str(tmp_path / "s.db"), config, tmp_path / "serve.log",
                    {"IM_SLACK_SIGNING": SECRET, "AGUI_EFFECTS": str(tmp_path / "fx")},
                    "--auth", str(auth))  # fmt: skip
    try:
        body = {"threadId": "S1", "runId": "r1", "state": {}, "tools": [], "context": [],
                "forwardedProps": {},
                "messages": [{"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
        r = httpx.post(f"{server.url}/agents/ops", json=body, timeout=120,
                       headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status_code == 200, r.text
        wait_until(lambda: bool(slack.at("/webhook")), 30, "the message")
        (message,) = slack.at("/webhook")
        (value,) = [e["value"] for b in message["blocks"] if b["type"] == "actions"
                    for e in b["elements"] if e["action_id"] == "approve"]  # fmt: skip
        payload = {"type": "block_actions", "user": {"id": "U-ANN"},
                   "response_url": f"{slack.url}/respond/1",
                   "actions": [{"action_id": "approve", "value": value}]}  # fmt: skip
        from urllib.parse import urlencode

        raw = urlencode({"payload": json.dumps(payload)}).encode()
        click = httpx.post(f"{server.url}/slack/interactions", content=raw, timeout=60,
                           headers=signed(raw, int(time.time())))  # fmt: skip
        assert click.status_code == 200, click.text
        assert (tmp_path / "fx").read_text().splitlines() == ["S1 delete_user 1001"]
        wait_until(lambda: bool(slack.updates("/respond/1")), 30, "the update")
        (update,) = slack.updates("/respond/1")
        assert "Approved by ann" in update["text"]
        wrong = signed(raw, int(time.time()), "wrong-secret-wrong")
        forged = httpx.post(f"{server.url}/slack/interactions", content=raw, timeout=60,
                            headers=wrong)  # fmt: skip
        assert forged.status_code == 401
    finally:
        code = server.stop()
        slack.stop()
    log = server.log.read_text()
    assert code in (0, -signal.SIGTERM), log
    assert SECRET not in log and "/respond/1" not in log


def test_a_signing_secret_written_inline_is_refused(tmp_path: Path) -> None:
    from intermission.errors import NotifyConfigError
    from intermission.notify.config import load_config

    config = tmp_path / "notify.yaml"
    config.write_text(textwrap.dedent("""
        targets:
          - {type: slack, url: "https://hooks.example.com/x", interactive: true,
             signing_secret: "0123456789abcdef0123"}
    """))  # fmt: skip
    try:
        load_config(config)
    except NotifyConfigError as exc:
        assert "signing_secret_env" in str(exc) and "0123456789abcdef" not in str(exc)
    else:
        raise AssertionError("an inline signing secret was taken")
