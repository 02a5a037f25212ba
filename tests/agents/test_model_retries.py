"""Issue 27, case 11: model calls are retried as the original framework retries them —
connection errors, timeouts, an empty reply, HTTP 429 and 5xx; not another 4xx, not a
broken model, not once text was streamed — bounded, with backoff and ``on_reason_retry``
before each retry. The final failure ends the request abnormally with a typed error on the
response and in the run's end event, and leaves it resumable by an empty prompt. Before,
one ConnectionError ended the request for good (abnormal answer, session done) and the
user's request was lost. A missing extra is an error when the model is made."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests._helpers import need_module

from intermission import (
    InMemoryAgentSession,
    MissingDependencyError,
    ModelCallError,
    ModelChunk,
    ModelError,
    ReActAgent,
    ReActInterceptor,
    ScriptedModel,
    ScriptExhaustedError,
    TeamAgent,
    UsageError,
)

SLEPT: list[float] = []


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff waits are recorded, not slept (no timing in tests)."""
    SLEPT.clear()

    async def record(seconds: float) -> None:
        SLEPT.append(seconds)

    monkeypatch.setattr("intermission.agents.react._sleep", record)


class StatusError(Exception):
    """An SDK's HTTP error: it carries ``status_code`` (as pydantic-ai's and openai's do)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status} from the provider")
        self.status_code = status


class Flaky:
    """A ChatModel whose first calls fail as told; later calls answer from the messages."""

    def __init__(self, *failures: Any) -> None:
        self.failures = list(failures)
        self.calls: list[list[Any]] = []

    async def stream(self, messages: list[Any], tools: Any) -> AsyncIterator[ModelChunk]:
        self.calls.append(list(messages))
        failure = self.failures.pop(0) if self.failures else None
        if failure == "empty":
            yield ModelChunk(text="")
            return
        if isinstance(failure, tuple):  # ("text", error): some text streams, then it fails
            yield ModelChunk(text=failure[0])
            raise failure[1]
        if failure is not None:
            raise failure
        user = [m.content for m in messages if m.role == "user"][-1]
        yield ModelChunk(text=f"answer to {user}")


class Hooks(ReActInterceptor):
    def __init__(self, pend_on: int | None = None) -> None:
        self.retries: list[tuple[str, int]] = []
        self.pend_on = pend_on

    def on_reason_retry(self, trace: Any, error: Exception, attempt: int) -> None:
        assert isinstance(error, ModelCallError) and error.retryable
        self.retries.append((str(error), attempt))
        if attempt == self.pend_on:
            self.pend_on = None  # (once)
            trace.session.pending(True, "rate limited: try later")


def agent_on(model: Any, hooks: Any = None, retries: int = 3, name: str = "asker") -> Any:
    b = ReActAgent.of(model).name(name).retry_config(max_retries=retries, delay_ms=100)
    return (b.interceptor(hooks) if hooks is not None else b).build()


TRANSIENT = {
    "connection error": lambda: ConnectionError("connection reset by peer"),
    "timeout": lambda: TimeoutError("read timed out"),
    "empty reply": lambda: "empty",
    "HTTP 429": lambda: ModelCallError("HTTP 429", status=429, retryable=True),
    "HTTP 503 of an SDK": lambda: StatusError(503),
    "HTTP 500 inside a ModelError": lambda: _wrapped(StatusError(500)),
}


def _wrapped(cause: Exception) -> ModelError:
    try:
        raise ModelError(f"provider: {cause}") from cause
    except ModelError as exc:
        return exc


@pytest.mark.parametrize("kind", list(TRANSIENT))
def test_a_transient_failure_is_retried_with_backoff_and_on_reason_retry(kind: str) -> None:
    model = Flaky(TRANSIENT[kind](), TRANSIENT[kind]())
    hooks = Hooks()
    s = InMemoryAgentSession.of("r")
    response = agent_on(model, hooks).prompt("hi").session(s).call()
    assert response.content == "answer to hi" and not response.is_abnormal
    assert response.error is None and len(model.calls) == 3
    assert [a for _, a in hooks.retries] == [1, 2] and SLEPT == [0.1, 0.2]  # linear backoff
    ends = [e for e in s.events if e.kind == "run_end"]
    assert len(ends) == 1 and not ends[0].is_abnormal and ends[0].error is None
    assert [e.turn for e in s.events if e.kind == "reason_start"] == [1]  # one turn
    assert s.status == "done"


PERMANENT = {
    "HTTP 400": lambda: ModelCallError("HTTP 400: bad request", status=400),
    "HTTP 401 of an SDK": lambda: StatusError(401),
    "HTTP 404 of an SDK": lambda: StatusError(404),
    "a bug in the model": lambda: RuntimeError("model bug"),
    "a broken reply": lambda: ModelError("a tool call's arguments are not JSON"),
}


@pytest.mark.parametrize("kind", list(PERMANENT))
def test_other_failures_are_not_retried(kind: str) -> None:
    model = Flaky(PERMANENT[kind]())
    hooks = Hooks()
    s = InMemoryAgentSession.of("p")
    response = agent_on(model, hooks).prompt("hi").session(s).call()
    assert len(model.calls) == 1 and hooks.retries == [] and SLEPT == []
    assert response.is_abnormal and response.content.startswith("Model error: ")
    assert isinstance(response.error, ModelError)
    assert not getattr(response.error, "retryable", False)
    if "HTTP" in kind:
        assert response.error.status == int(kind.split()[1])  # type: ignore[attr-defined]


def test_a_scripted_model_out_of_replies_is_not_retried() -> None:
    model = ScriptedModel(["one"])
    agent = agent_on(model)
    s = InMemoryAgentSession.of("out")
    agent.prompt("first").session(s).call()
    response = agent.prompt("second").session(s).call()
    assert isinstance(response.error, ScriptExhaustedError) and model.turn == 2
    assert response.content.startswith("Model error: ScriptExhaustedError: ")


def test_no_retry_once_text_was_streamed() -> None:
    model = Flaky(("Sure, let me ", ConnectionError("reset")))
    s = InMemoryAgentSession.of("streamed")
    events = list(agent_on(model).prompt("hi").session(s).stream())
    assert len(model.calls) == 1 and SLEPT == []
    deltas = [e.text for e in events if e.kind == "reason_delta" and not e.final]
    assert deltas == ["Sure, let me "]  # the reader saw it once; it is not shown twice
    end = events[-1]
    assert end.kind == "run_end" and end.is_abnormal
    assert end.error == "ModelCallError: ConnectionError: reset"


def test_the_final_failure_is_typed_kept_and_resumable(make_store: Any) -> None:
    """Every attempt fails: the response and the run's end carry the typed error, and
    an empty prompt — in another process, from a store — asks again and finishes."""
    store = make_store()
    model = Flaky(*[ConnectionError("connection refused")] * 3)
    hooks = Hooks()
    store.save(InMemoryAgentSession.of("down"))
    with store.claim("down") as s:
        response = agent_on(model, hooks, retries=2).prompt("what is due?").session(s).call()
    error = response.error
    assert isinstance(error, ModelCallError) and error.retryable and error.attempts == 3
    assert isinstance(error.__cause__, ConnectionError) and len(model.calls) == 3
    assert response.is_abnormal and response.content == (
        "Model error: ConnectionError: connection refused (gave up after 3 attempts)"
    )
    assert [a for _, a in hooks.retries] == [1, 2] and SLEPT == [0.1, 0.2]
    saved = store.load("down")
    assert saved.status == "paused" and not saved.is_pending
    end = [e for e in saved.events if e.kind == "run_end"][-1]
    assert end.is_abnormal and end.error == "ModelCallError: ConnectionError: connection refused"
    assert end.content == response.content
    # the model is back: an empty prompt continues the original prompt
    with store.resume("down") as s:
        again = agent_on(Flaky()).prompt().session(s).call()
    assert again.content == "answer to what is due?" and again.error is None
    done = store.load("down")
    assert done.status == "done"
    assert [m.content for m in done.messages] == ["what is due?", "answer to what is due?"]


def test_a_pending_set_before_a_retry_stops_the_run_resumably() -> None:
    model = Flaky(StatusError(429), StatusError(429))
    s = InMemoryAgentSession.of("pend")
    agent = agent_on(model, Hooks(pend_on=1))
    response = agent.prompt("hi").session(s).call()
    assert s.is_pending and s.pending_reason == "rate limited: try later"
    assert len(model.calls) == 1 and SLEPT == [] and response.error is None
    assert agent.prompt().session(s).call().content == "answer to hi"
    assert len(model.calls) == 3 and SLEPT == [0.1]  # the second 429 was retried


def test_a_team_member_whose_model_fails_stops_the_team_resumably() -> None:
    first = agent_on(Flaky(*[TimeoutError("slow")] * 2), retries=1, name="first")
    second = agent_on(Flaky(), name="second")
    team = TeamAgent.sequential("pair", [first, second])
    s = InMemoryAgentSession.of("team")
    response = team.prompt("go").session(s).call()
    assert response.is_abnormal and isinstance(response.error, ModelCallError)
    assert response.content == "Model error: TimeoutError: slow (gave up after 2 attempts)"
    end = [e for e in s.events if e.kind == "team_end"][-1]
    assert end.is_abnormal and end.error == "ModelCallError: TimeoutError: slow"
    assert s.status == "paused" and second.model.calls == []  # the team stopped there
    done = team.prompt().session(s).call()
    assert not done.is_abnormal and s.status == "done"
    assert done.content.startswith("answer to go\n\nPrevious step (first): answer to go")


def test_retry_config_is_checked() -> None:
    builder = ReActAgent.of(ScriptedModel(["x"]))
    assert builder.build().retry.max_retries == 3 and builder.build().retry.delay_ms == 1000
    for bad in ((-1, 10), (2, -5), ("3", 10)):
        with pytest.raises(UsageError):
            builder.retry_config(*bad)  # type: ignore[arg-type]
    assert builder.retry_config(0, 0).build().retry.max_retries == 0


# -- the OpenAI-compatible adapter over a real local HTTP server --------------------------
class Script:
    """What the server answers, request by request: a status (with a JSON body), "ok"
    (a normal reply), or "cut" (a streamed chunk of text, then the connection drops)."""

    def __init__(self) -> None:
        self.plan: list[Any] = []
        self.seen = 0


SCRIPT = Script()


class Completions(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SCRIPT.seen += 1
        step = SCRIPT.plan.pop(0) if SCRIPT.plan else "ok"
        if isinstance(step, int):
            payload = json.dumps({"error": {"message": f"status {step}"}}).encode()
            self.send_response(step)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if not body.get("stream"):
            message = {"role": "assistant", "content": "fine"}
            payload = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        delta = {"choices": [{"index": 0, "delta": {"content": "fine"}}]}
        chunk(f"data: {json.dumps(delta)}\n\n".encode())
        if step == "cut":
            self.connection.shutdown(2)  # mid-stream: no terminating chunk
            return
        chunk(b"data: [DONE]\n\n")
        chunk(b"")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    need_module("httpx", "the openai extra (pip install intermission[openai])")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def openai_agent(base_url: str, stream: bool, retries: int = 3) -> Any:
    from intermission import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=base_url, api_key="k", stream=stream, timeout=10)
    return agent_on(model, retries=retries)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_openai_compatible_429_and_500_are_retried_400_is_not(server: str, stream: bool) -> None:
    SCRIPT.plan, SCRIPT.seen = [429, 500, "ok"], 0
    response = openai_agent(server, stream).prompt("hi").session(InMemoryAgentSession.of()).call()
    assert response.content == "fine" and SCRIPT.seen == 3 and SLEPT == [0.1, 0.2]
    SCRIPT.plan, SCRIPT.seen = [400, "ok"], 0
    SLEPT.clear()
    s = InMemoryAgentSession.of("bad")
    response = openai_agent(server, stream).prompt("hi").session(s).call()
    assert SCRIPT.seen == 1 and SLEPT == [] and response.is_abnormal
    error = response.error
    assert isinstance(error, ModelCallError) and error.status == 400 and not error.retryable
    assert "HTTP 400" in response.content and s.status == "paused"
    # resumable: the server answers now
    assert openai_agent(server, stream).prompt().session(s).call().content == "fine"


def test_openai_compatible_gives_up_after_its_retries(server: str) -> None:
    SCRIPT.plan, SCRIPT.seen = [503, 503, 503], 0
    response = (
        openai_agent(server, True, retries=2).prompt("hi").session(InMemoryAgentSession.of()).call()
    )
    error = response.error
    assert isinstance(error, ModelCallError) and error.status == 503 and error.attempts == 3
    assert SCRIPT.seen == 3 and response.content.endswith("(gave up after 3 attempts)")


def test_openai_compatible_a_dropped_stream_after_text_is_not_retried(server: str) -> None:
    SCRIPT.plan, SCRIPT.seen = ["cut", "ok"], 0
    response = openai_agent(server, True).prompt("hi").session(InMemoryAgentSession.of()).call()
    assert SCRIPT.seen == 1 and response.is_abnormal
    assert isinstance(response.error, ModelCallError) and response.error.retryable


def test_openai_compatible_connection_refused_is_retried() -> None:
    need_module("httpx", "the openai extra (pip install intermission[openai])")
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    response = (
        openai_agent(f"http://127.0.0.1:{port}/v1", True, retries=2)
        .prompt("hi")
        .session(InMemoryAgentSession.of())
        .call()
    )
    error = response.error
    assert isinstance(error, ModelCallError) and error.retryable and error.status is None
    assert error.attempts == 3 and SLEPT == [0.1, 0.2]


def test_pydantic_ai_http_errors_are_retried_by_status() -> None:
    need_module("pydantic_ai", "the pydantic-ai extra (pip install intermission[pydantic-ai])")
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from intermission import PydanticAIModel

    statuses = [503, 429]

    def provider(messages: list[Any], info: Any) -> Any:
        if statuses:
            raise ModelHTTPError(statuses.pop(0), "model", {"error": "busy"})
        return ModelResponse(parts=[TextPart("fine")])

    model = PydanticAIModel(FunctionModel(provider), stream=False)
    assert agent_on(model).prompt("hi").session(InMemoryAgentSession.of()).call().content == "fine"
    assert SLEPT == [0.1, 0.2]
    statuses[:] = [400]
    response = agent_on(model).prompt("hi").session(InMemoryAgentSession.of()).call()
    assert response.is_abnormal and isinstance(response.error, ModelCallError)
    assert response.error.status == 400 and not response.error.retryable and len(SLEPT) == 2


def test_a_missing_extra_fails_when_the_model_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    from intermission import OpenAIChatModel, PydanticAIModel

    monkeypatch.setitem(sys.modules, "httpx", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"intermission\[openai\]"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    with pytest.raises(MissingDependencyError, match=r"intermission\[pydantic-ai\]"):
        PydanticAIModel("openai:gpt-4o-mini")
