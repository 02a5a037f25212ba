"""The same client script (the real ``@ag-ui/client``) against pydantic-ai's own AG-UI
adapter (``FunctionModel``, a tool with ``requires_approval``) and against ours: the same
event kinds in the same order for a run with a tool approval (issue 22).

Deliberate differences, asserted so that a change on either side shows up here:

- before the interrupting ``RUN_FINISHED`` we send ``STATE_SNAPSHOT`` and
  ``MESSAGES_SNAPSHOT``, as the AG-UI interrupt contract asks; pydantic-ai sends neither;
- pydantic-ai opens and closes an empty text message before the tool call (the assistant
  message the call belongs to); ours names the model's message as the call's
  ``parentMessageId`` and sends no text message without text;
- streamed text comes in as many ``TEXT_MESSAGE_CONTENT`` events as the model's chunks
  (compared collapsed).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("pydantic_ai", "pydantic-ai-slim[ag-ui]")

from ._server import JS, ROOT, Server, free_port  # noqa: E402

SCRIPT = [
    {"runId": "r1", "user": "delete user 1001"},
    {"runId": "r2", "resumeAll": {"approved": True}},
]


def _client(url: str, thread: str) -> dict[str, Any]:
    plan = {"url": url, "threadId": thread, "steps": SCRIPT}
    out = subprocess.run([shutil.which("node") or "node", str(JS / "agui_client.mjs"),
                          json.dumps(plan)], cwd=JS, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _collapse(kinds: list[str]) -> list[str]:
    out: list[str] = []
    for kind in kinds:
        if not (out and kind == out[-1] == "TEXT_MESSAGE_CONTENT"):
            out.append(kind)
    return out


def _without_empty_text(events: list[dict[str, Any]]) -> list[str]:
    kinds = [e["type"] for e in events]
    out: list[str] = []
    for i, kind in enumerate(kinds):
        if (
            kind == "TEXT_MESSAGE_START"
            and i + 1 < len(kinds)
            and kinds[i + 1] == "TEXT_MESSAGE_END"
        ):
            continue
        if kind == "TEXT_MESSAGE_END" and i > 0 and kinds[i - 1] == "TEXT_MESSAGE_START":
            continue
        out.append(kind)
    return out


def test_same_event_kinds_as_pydantic_ai_for_a_tool_approval(tmp_path: Path) -> None:
    port = free_port()
    theirs_proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "agui" / "pydantic_ai_server.py"), str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ours = Server(str(tmp_path / "s.db"), tmp_path / "e.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert theirs_proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        theirs = _client(f"http://127.0.0.1:{port}/agents/ops", "diff-1")
        mine = _client(f"{ours.url}/agents/ops", "diff-1")
    finally:
        theirs_proc.terminate()
        theirs_proc.wait(timeout=20)
        ours.stop()
    for side in (theirs, mine):
        assert [s["error"] for s in side["steps"]] == [None, None]
        assert [s["outcome"] for s in side["steps"]] == ["interrupt", "success"]
    # pause: the same kinds once the documented differences are taken out
    pause_theirs = theirs["steps"][0]
    pause_mine = mine["steps"][0]
    assert pause_theirs["types"][1:3] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_END"]
    assert "STATE_SNAPSHOT" not in pause_theirs["types"]
    assert pause_mine["types"][-3:-1] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
    mine_kinds = [
        k for k in pause_mine["types"] if k not in ("STATE_SNAPSHOT", "MESSAGES_SNAPSHOT")
    ]
    assert _without_empty_text(pause_theirs["events"]) == mine_kinds == [
        "RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED",
    ]  # fmt: skip
    # the interrupt: same reason, a toolCallId, the same response schema's fields
    (i_theirs,) = pause_theirs["events"][-1]["outcome"]["interrupts"]
    (i_mine,) = pause_mine["events"][-1]["outcome"]["interrupts"]
    assert i_theirs["reason"] == i_mine["reason"] == "tool_call"
    for i in (i_theirs, i_mine):
        assert set(i["responseSchema"]["properties"]) == {"approved", "editedArgs", "reason"}
        assert i["responseSchema"]["required"] == ["approved"]
    # resume: identical kinds (only the original call's result, no new TOOL_CALL_START)
    assert _collapse(theirs["steps"][1]["types"]) == _collapse(mine["steps"][1]["types"]) == [
        "RUN_STARTED", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "RUN_FINISHED",
    ]  # fmt: skip

    # and the client ends with the same conversation (roles and text)
    def said(side: dict[str, Any]) -> list[tuple[str, str]]:
        return [(m["role"], m.get("content") or "") for m in side["messages"] if m.get("content")]

    assert said(theirs) == said(mine)
