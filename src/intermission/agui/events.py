"""intermission events → AG-UI 1.0 events (``ag_ui.core`` models, validated as built).

One :class:`Translator` per run: it turns the run's events, as the session logs them, into
the AG-UI events a client sees. The same function serves the live stream and the replay
from the log, so a client that reconnects gets the very events (and ids) it missed.

Every AG-UI event gets a cursor ``(seq, k)`` (see :mod:`intermission.agui.sse`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from ag_ui import core as ag

from ..messages import ChatMessage

__all__ = ["ENDS", "STARTS", "Translator", "agui_messages", "args_json", "state_of"]

STARTS = ("run_start", "team_start")
ENDS = ("run_end", "team_end")
HIDDEN_STATE = ("agui.",)
"""Context keys the server keeps for itself: not shown in STATE_SNAPSHOT."""


def args_json(args: Any) -> str:
    """A tool call's arguments as AG-UI sends them: keys sorted, so the live stream and a
    replay from the store (which need not keep the model's key order) send the same text."""
    return json.dumps(args, sort_keys=True)


def state_of(session: Any) -> dict[str, Any]:
    """The session's context as AG-UI state (JSON values only; server keys left out)."""
    return {k: v for k, v in session.context.items() if not str(k).startswith(HIDDEN_STATE)}


def agui_messages(
    session_id: str,
    messages: Iterable[ChatMessage],
    waiting: Iterable[tuple[str, list[Any]]] = (),
    ids: dict[int, str] | None = None,
) -> list[Any]:
    """The session's chat history as AG-UI messages, then the assistant messages whose
    tool calls wait for a decision (``waiting``). A message keeps the id the client saw
    (``ids``, by position: the user's own id, the streamed text's); others get one made
    from their position."""
    out: list[Any] = []
    for i, m in enumerate(messages):
        mid = (ids or {}).get(i) or f"{session_id}:m{i}"
        if m.role == "user":
            out.append(ag.UserMessage(id=mid, role="user", content=m.content or ""))
        elif m.role == "assistant":
            calls = [
                ag.ToolCall(
                    id=c.id or f"{mid}:c{j}",
                    type="function",
                    function=ag.FunctionCall(name=c.name, arguments=args_json(c.args)),
                )
                for j, c in enumerate(m.tool_calls)
            ]
            out.append(
                ag.AssistantMessage(
                    id=mid, role="assistant", content=m.content or None, tool_calls=calls or None
                )
            )
        elif m.role == "tool":
            out.append(
                ag.ToolMessage(
                    id=mid, role="tool", content=m.content or "", tool_call_id=m.tool_call_id or ""
                )
            )
    for rid, proposed in waiting:
        out.append(
            ag.AssistantMessage(
                id=rid,
                role="assistant",
                tool_calls=[
                    ag.ToolCall(
                        id=w.id or f"{rid}:{w.name}",
                        type="function",
                        function=ag.FunctionCall(name=w.name, arguments=args_json(w.args)),
                    )
                    for w in proposed
                ],
            )
        )
    return out


class Translator:
    """Maps one run's intermission events to AG-UI events.

    ``run_id``: the AG-UI run id to report (the client's); ``finish(end)`` is called at
    the run's outer end and returns the AG-UI events that close it (snapshots, outcome),
    given the end event. ``chained(end)``: True when another outer run continues this
    AG-UI run after ``end`` (a new message run after the resume that applied recorded
    decisions): that end closes nothing and the next run's start sends no RUN_STARTED.
    """

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        finish: Callable[[Any], list[Any]],
        chained: Callable[[Any], bool] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.finish = finish
        self.chained = chained
        self.started = False
        self.outer: str | None = None
        self.open_text: set[str] = set()
        self.open_steps: list[str] = []
        self.done = False
        self.texts: list[str] = []
        """Ids of the text messages streamed in this run, in order."""
        self.calls: list[tuple[str, list[Any]]] = []
        """Tool calls proposed in this run, by message: what MESSAGES_SNAPSHOT adds while
        they wait (the session's history holds them only once they ran)."""

    def feed(self, event: Any) -> list[Any]:
        """The AG-UI events for one intermission event (often none)."""
        kind = event.kind
        out: list[Any] = []
        if self.outer is None:
            if kind not in STARTS:
                return out
            self.outer = event.run_id
            if not self.started:
                self.started = True
                out.append(ag.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
            return out
        if self.done:
            return out
        if kind == "reason_delta":
            rid = event.reason_id
            if rid is None or not event.text:
                return out  # the closing text of an abnormal end: the outcome says it
            if rid not in self.open_text:
                self.open_text.add(rid)
                self.texts.append(rid)
                out.append(ag.TextMessageStartEvent(message_id=rid, role="assistant"))
            out.append(ag.TextMessageContentEvent(message_id=rid, delta=event.text))
        elif kind == "reason_end":
            rid = event.reason_id
            if rid in self.open_text:
                self.open_text.discard(rid)
                out.append(ag.TextMessageEndEvent(message_id=rid))
            elif event.content:
                self.texts.append(rid)
                out.append(ag.TextMessageStartEvent(message_id=rid, role="assistant"))
                out.append(ag.TextMessageContentEvent(message_id=rid, delta=event.content))
                out.append(ag.TextMessageEndEvent(message_id=rid))
            if event.tool_calls:
                self.calls.append((rid, list(event.tool_calls)))
            for call in event.tool_calls:
                cid = call.id or f"{rid}:{call.name}"
                out.append(
                    ag.ToolCallStartEvent(
                        tool_call_id=cid, tool_call_name=call.name, parent_message_id=rid
                    )
                )
                out.append(ag.ToolCallArgsEvent(tool_call_id=cid, delta=args_json(call.args)))
                out.append(ag.ToolCallEndEvent(tool_call_id=cid))
        elif kind == "tool_call_end":
            content = event.observation if event.observation is not None else event.error
            out.append(
                ag.ToolCallResultEvent(
                    message_id=f"{event.call_uuid}:result",
                    tool_call_id=event.call_uuid,
                    content=content or "",
                    role="tool",
                )
            )
        elif kind == "node_start":
            name = event.node_id
            if name not in self.open_steps:
                self.open_steps.append(name)
                out.append(ag.StepStartedEvent(step_name=name))
        elif kind == "node_end":
            name = event.node_id
            if name in self.open_steps:
                self.open_steps.remove(name)
                out.append(ag.StepFinishedEvent(step_name=name))
        elif kind in ENDS and event.run_id == self.outer:
            out += self.close()
            if self.chained is not None and self.chained(event):
                self.outer = None  # the next outer run goes on with this AG-UI run
                return out
            out += self.finish(event)
            self.done = True
        return out

    def close(self) -> list[Any]:
        """End what is still open (a pause leaves the waiting node's step open)."""
        out: list[Any] = [ag.TextMessageEndEvent(message_id=m) for m in sorted(self.open_text)]
        out += [ag.StepFinishedEvent(step_name=s) for s in reversed(self.open_steps)]
        self.open_text.clear()
        self.open_steps.clear()
        return out

    def error(self, message: str, code: str) -> list[Any]:
        """The RUN_ERROR that ends a failed run (after RUN_STARTED when there was one)."""
        self.done = True
        return [ag.RunErrorEvent(message=message, code=code)]
