"""A script that uses ``OpenAIChatModel`` against a local fake server, then exits:
``python tests/agents/_openai_exit.py MODE`` (``streamed``, ``whole``, ``abandoned``: a
stream read with ``for`` and given up in the middle of the model's reply). Written as a
user's script is, at module level (what it made lives until the interpreter ends). Its
stderr must stay empty at exit (no "Task was destroyed but it is pending!")."""

from __future__ import annotations

import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (the repository: tests.*)

from tests.agents.test_openai_compat import ChatCompletions, delete_user

from intermission import InMemoryAgentSession, ReActAgent
from intermission.agents.openai_compat import OpenAIChatModel


class Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        # the abandoned reader closes its connection mid-body, as a reader may: the fake
        # server's write then fails, which is no noise of the process under test (a CI run
        # once printed that reset here)
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


mode = sys.argv[1]
httpd = Server(("127.0.0.1", 0), ChatCompletions)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
model = OpenAIChatModel("m", base_url=url, api_key="k", stream=mode != "whole")
agent = ReActAgent.of(model).name("ops").tools(delete_user).build()
request = agent.prompt("delete user 1001").session(InMemoryAgentSession.of("o"))
if mode == "abandoned":
    stream = request.stream()
    deltas = 0
    for _number, event in enumerate(stream):  # (the reader held by enumerate, to the end)
        deltas += event.kind == "reason_delta"
        if deltas == 2:  # in the middle of the final reply's body
            break
    stream.dispose()
    print("abandoned")
else:
    print(request.call().content)
