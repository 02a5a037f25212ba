"""The OpenAI-compatible model against a real HTTP server on 127.0.0.1 (R15)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from intermission import InMemoryAgentSession, ReActAgent, tool
from intermission.agents.openai_compat import OpenAIChatModel

REQUESTS: list[dict[str, Any]] = []


class ChatCompletions(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions":
            self.send_response(404)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not found")
            return
        REQUESTS.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        last = body["messages"][-1]
        if last["role"] == "tool":
            text, calls = f"done: {last['content']}", []
        else:
            text, calls = "", [("call_abc", "delete_user", json.dumps({"user_id": 1001}))]
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ]
            payload = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        deltas: list[dict[str, Any]] = [
            {"content": text[i : i + 3]} for i in range(0, len(text), 3)
        ]
        for i, name, args in calls:  # tool-call deltas split across chunks, as servers do
            deltas.append(
                {"tool_calls": [{"index": 0, "id": i, "function": {"name": name, "arguments": ""}}]}
            )
            for j in range(0, len(args), 5):
                deltas.append(
                    {"tool_calls": [{"index": 0, "function": {"arguments": args[j : j + 5]}}]}
                )
        for delta in deltas:
            chunk = {"choices": [{"index": 0, "delta": delta}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ChatCompletions)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    REQUESTS.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@tool
def delete_user(user_id: int) -> str:
    """Delete a user."""
    return f"user {user_id} deleted"


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_openai_compatible_model_runs_a_tool_loop(server: str, stream: bool) -> None:
    model = OpenAIChatModel("test-model", base_url=server, api_key="sk-test", stream=stream)
    agent = ReActAgent.of(model).name("ops").tools(delete_user).build()
    s = InMemoryAgentSession.of("o")
    resp = agent.prompt("delete user 1001").session(s).call()
    assert resp.content == "done: user 1001 deleted" and not resp.is_abnormal
    assert [r["path"] for r in REQUESTS] == ["/v1/chat/completions"] * 2
    first, second = REQUESTS
    assert first["auth"] == "Bearer sk-test" and first["model"] == "test-model"
    assert first["stream"] is stream
    assert first["tools"][0]["function"]["parameters"]["properties"]["user_id"]["type"] == "integer"
    assistant, tool_msg = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "call_abc" == tool_msg["tool_call_id"]
    ends = [e for e in s.events if e.kind == "tool_call_end"]
    assert ends[0].call_uuid == "call_abc" and ends[0].args == {"user_id": 1001}


def test_http_error_becomes_an_abnormal_answer(server: str) -> None:
    model = OpenAIChatModel("m", base_url=server + "/missing", api_key="k")
    resp = ReActAgent.of(model).build().prompt("hi").session(InMemoryAgentSession.of("e")).call()
    assert resp.is_abnormal and "HTTP 404" in resp.content


@pytest.mark.parametrize("mode", ["streamed", "whole", "abandoned"])
def test_a_process_that_used_the_model_exits_without_asyncio_noise(mode: str) -> None:
    # the streamed reply used to leave httpx's body iterators to the garbage collector,
    # whose close task the event loop never ran: "Task was destroyed but it is pending!"
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("_openai_exit.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    said = "abandoned" if mode == "abandoned" else "done: user 1001 deleted"
    assert done.stdout.strip() == said
    assert "Task was destroyed" not in done.stderr
    assert done.stderr == ""
