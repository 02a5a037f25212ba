"""The reviewer console's card for an approval whose version this server does not serve
(R62, blue-green): it names the version (``ops@1``), says it waits for it, and its
buttons are disabled; a served one's are not. The console's own script renders the card,
in Node on a minimal DOM (the browser tests drive the whole page)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests._helpers import need

from intermission.agui.console import CONSOLE_HTML

JS = Path(__file__).resolve().parents[1] / "js"


def _card(tmp_path: Path, item: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    need(node is not None, "Node.js (apt-get install nodejs)")
    assert node is not None
    script = re.search(r"<script>(.*)</script>", CONSOLE_HTML, re.S)
    assert script is not None
    path = tmp_path / "console.js"
    path.write_text(script.group(1))
    out = subprocess.run([node, str(JS / "console_card.mjs"), str(path), json.dumps(item)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _item(**version: Any) -> dict[str, Any]:
    interrupt = {"id": "call-1", "reason": "tool_call", "message": "delete_user(user_id=1001)",
                 "metadata": {"intermission": {"args": {"user_id": 1001}}}}  # fmt: skip
    return {"threadId": "t1", "agent": "ops", **version, "interrupt": interrupt}


def test_a_card_of_a_version_not_served_here_is_marked_and_not_decidable(
    tmp_path: Path,
) -> None:
    waiting = "waiting for ops@1, not served here (this server serves ops@2)"
    card = _card(tmp_path, _item(version="ops@1", served=False, waiting=waiting))
    assert "agent ops · ops@1 · tool call" in card["text"]
    assert card["note"] == waiting
    assert card["attrs"]["data-served"] == "false"
    assert card["approve"] == {"disabled": True, "title": waiting}
    assert card["reject"] == {"disabled": True, "title": waiting}


def test_a_card_of_a_served_version_can_be_decided(tmp_path: Path) -> None:
    card = _card(tmp_path, _item(version="ops@2", served=True))
    assert "ops@2" in card["text"] and card["note"] is None
    assert "data-served" not in card["attrs"]
    assert card["approve"]["disabled"] is False and card["reject"]["disabled"] is False
    older = _card(tmp_path, _item())  # a server of an earlier release lists no version
    assert older["approve"]["disabled"] is False and older["note"] is None
