"""A click's ``response_url`` is a credential (anyone holding it may rewrite the message for
30 minutes): httpx logs each request's URL at INFO as it spells it (host lower-cased), so a
``response_url`` spelled otherwise slipped past the filter that hides it — in
``intermission notify``'s log (INFO) for the outbox's update, and in the ephemeral answer.
Both spellings are hidden now (issue 41, attacked)."""

from __future__ import annotations

import logging
from typing import Any

from tests._helpers import need_module

need_module("httpx", "httpx (extra notify)")

from tests.slack._slack import SECRET, StandIn  # noqa: E402

from intermission.notify import SlackWebhook  # noqa: E402
from intermission.notify.notification import Notification  # noqa: E402
from intermission.slack.interactions import _post  # noqa: E402


def test_a_response_url_in_another_spelling_is_not_logged(caplog: Any) -> None:
    slack = StandIn()
    try:
        host = slack.url.replace("127.0.0.1", "localhost")
        target = SlackWebhook(f"{host}/webhook", name="slack", interactive=True,
                              signing_secret=SECRET)  # fmt: skip
        url = slack.url.replace("127.0.0.1", "LOCALHOST") + "/respond/T0-SECRET-PATH"
        n = Notification(key="ntf_" + "0" * 32, kind="decided", session_id="S", agent=None,
                         created_ms=0.0, reason=None, deadline_ms=None, interrupts=(),
                         roles=(), detail={}, link=None,
                         reply={"target": "slack", "url": url,
                                "message": {"text": "done"}})  # fmt: skip
        with caplog.at_level(logging.INFO):
            target.send(n)
            _post(url, {"text": "ephemeral"})
        target.close()
        assert len(slack.at("/respond/T0-SECRET-PATH")) == 2  # (both were sent)
        assert "T0-SECRET-PATH" not in caplog.text
    finally:
        slack.stop()


def test_both_spellings_are_hidden_only_while_the_request_is_made() -> None:
    from intermission.notify.targets import _HideTargetURLs, hiding

    url = "https://HOOKS.slack.com:443/actions/T/1/x"
    with hiding(url):
        assert {url, "https://hooks.slack.com/actions/T/1/x"} <= _HideTargetURLs.urls
    assert not {url, "https://hooks.slack.com/actions/T/1/x"} & _HideTargetURLs.urls
