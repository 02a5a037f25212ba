"""Decide from Slack (R63): the adapter that takes an interactive Slack message's clicks.

``serve --notify FILE`` with a ``type: slack`` target that has ``interactive: true`` mounts
``POST /slack/interactions`` (:mod:`.interactions`): each request is verified by Slack's
``v0`` signature (:mod:`.signature`), its Slack user mapped to a person by the identity
file's ``slack_users:``, and the click decided as every surface decides (the served
agents' policy, under the thread's claim), recorded ``via: slack``. The message is
updated with the outcome through the outbox (:mod:`.reply`).
"""

from __future__ import annotations

from .signature import SlackSignatureError, sign, verify

__all__ = ["SlackSignatureError", "sign", "verify"]
