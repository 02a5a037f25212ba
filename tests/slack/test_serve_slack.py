"""``serve --notify FILE --auth FILE`` with an interactive Slack target: the message the
server sends carries buttons, ``POST /slack/interactions`` takes a click signed as Slack
signs it (no bearer token: the signature is its authentication), and the message is
updated with the outcome; a config with a signing secret written inline is refused."""

from __future__ import annotations

import signal
import textwrap
import time
from pathlib import Path

from tests._helpers import need_module
from tests.notify._receivers import wait_until

from ._slack import (
    SECRET,
    StandIn,
    button,
    click_body,
    pause_served,
    ran,
    serve_slack,
    signed,
)


def test_serve_takes_a_signed_click_and_updates_the_message(tmp_path: Path) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    need_module("httpx", "httpx (extra notify)")
    import httpx

    slack = StandIn()
    server = serve_slack(tmp_path, slack, tmp_path / "fx")
    try:
        message = pause_served(server, slack)
        raw = click_body("U-ANN", "approve", button(message, "approve"),
                         f"{slack.url}/respond/1")  # fmt: skip
        click = httpx.post(f"{server.url}/slack/interactions", content=raw, timeout=60,
                           headers=signed(raw, int(time.time())))  # fmt: skip
        assert click.status_code == 200, click.text
        assert ran(tmp_path / "fx") == ["S1 delete_user 1001"]
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
