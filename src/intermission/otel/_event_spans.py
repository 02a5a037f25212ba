"""The spans a request's events open and close: the stack of open spans (member agents,
graph nodes, model calls, tool calls) and what each event does to it. The base of
:class:`~intermission.otel._tracer.Tracing`, which routes the events here and keeps the
requests, their roots and what waits for a save."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import attributes as A
from ._decisions import decision_attrs
from ._naming import agent_of, messages_json, model_of, output_json, provider_of
from ._shapes import Open, Request

__all__ = ["EventSpans"]


class EventSpans:
    """The stack and the event handlers (see the module docstring)."""

    tracer: Any
    capture: bool
    """Record messages, tool arguments and results too."""
    node_spans: bool
    """A span per graph node (asked for)."""

    # -- the stack ------------------------------------------------------------------------
    def _push(
        self, req: Request, key: tuple[str, ...], name: str, attrs: dict[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Open:  # fmt: skip
        parent = trace.set_span_in_context(req.top)
        span = self.tracer.start_span(name, context=parent, kind=kind, attributes=attrs)
        item = Open(key, span)
        req.stack.append(item)
        self._focus(req)
        return item

    def _pop(self, req: Request, key: tuple[str, ...]) -> Open | None:
        """Close the span under ``key`` and whatever opened after it (None: not open)."""
        found = next((i for i in range(len(req.stack) - 1, -1, -1) if req.stack[i].key == key),
                     None)  # fmt: skip
        if found is None:
            return None
        while len(req.stack) > found + 1:
            inner = req.stack.pop()
            if inner.key[0] == "node":
                inner.span.set_attribute(A.NODE_COMPLETED, False)
            inner.span.end()
        item = req.stack.pop()
        self._focus(req)
        return item

    def _focus(self, req: Request) -> None:
        """Make the innermost open span current, so spans of user code (a tool's HTTP
        call) nest under it."""
        self._unfocus(req)
        req.token = otel_context.attach(trace.set_span_in_context(req.top))

    @staticmethod
    def _unfocus(req: Request) -> None:
        token, req.token = req.token, None
        if token is None:
            return
        # quietly: a token set in another context (a task already gone) cannot be detached,
        # and the API's own detach would log that as an error
        runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
        try:
            if runtime is not None:
                runtime.detach(token)
            else:
                otel_context.detach(token)  # type: ignore[arg-type]
        except Exception:
            pass

    # -- events ---------------------------------------------------------------------------
    def _node_start(self, req: Request, ev: Any) -> None:
        if not self.node_spans:
            return
        for i in range(len(req.stack) - 1, -1, -1):
            key = req.stack[i].key
            if key[0] == "node" and key[1] == ev.graph_id:
                # a node of this graph still open: its branch parked, a sibling starts
                self._pop(req, key).span.end()  # type: ignore[union-attr]
                break
        attrs = {A.NODE_ID: ev.node_id, A.NODE_KIND: ev.node_kind, A.GRAPH_ID: ev.graph_id}
        self._push(req, ("node", ev.graph_id, ev.node_id), f"node {ev.node_id}", attrs)

    def _node_end(self, req: Request, ev: Any) -> None:
        if not self.node_spans:
            return
        item = self._pop(req, ("node", ev.graph_id, ev.node_id))
        if item is not None:
            item.span.set_attribute(A.NODE_COMPLETED, True)
            item.span.end()

    def _reason_start(self, req: Request, ev: Any) -> None:
        agent = agent_of(req.session, ev.agent)
        model = getattr(agent, "model", None)
        requested = model_of(model)
        attrs: dict[str, Any] = {
            A.OPERATION: "chat", A.PROVIDER: provider_of(model), A.CONVERSATION: ev.session_id,
            A.TURN: ev.turn,
        }  # fmt: skip
        if requested is not None:
            attrs[A.REQUEST_MODEL] = requested
        if self.capture:
            state = req.session.traces.get(ev.agent)
            memory = getattr(state, "working_memory", None)
            if memory is not None:
                attrs[A.INPUT_MESSAGES] = messages_json(memory)
            system = getattr(agent, "system_prompt", None)
            if system:
                attrs[A.SYSTEM_INSTRUCTIONS] = json.dumps([{"type": "text", "content": system}])
        local = type(model).__name__ == "ScriptedModel"
        name = f"chat {requested}" if requested else "chat"
        kind = SpanKind.INTERNAL if local else SpanKind.CLIENT
        self._push(req, ("reason", ev.reason_id), name, attrs, kind)

    def _reason_end(self, req: Request, ev: Any) -> None:
        item = self._pop(req, ("reason", ev.reason_id))
        if item is None:
            return
        span = item.span
        span.set_attribute(A.FINISH_REASONS, ["tool_call" if ev.tool_calls else "stop"])
        usage = getattr(ev, "usage", None)
        if isinstance(usage, dict):
            for key, name in (("input_tokens", A.INPUT_TOKENS), ("output_tokens",
                                                                  A.OUTPUT_TOKENS)):  # fmt: skip
                if isinstance(usage.get(key), int):
                    span.set_attribute(name, usage[key])
        if self.capture:
            span.set_attribute(A.OUTPUT_MESSAGES, output_json(ev.content, ev.tool_calls))
        span.end()

    def _tool_start(self, req: Request, ev: Any) -> None:
        if ev.call_uuid in req.not_run:
            return  # (its not-run span was recorded with the decision)
        attrs: dict[str, Any] = {
            A.OPERATION: "execute_tool", A.TOOL_NAME: ev.tool_name, A.TOOL_CALL_ID: ev.call_uuid,
            A.TOOL_TYPE: "function", A.CONVERSATION: ev.session_id,
        }  # fmt: skip
        state = req.session.traces.get(ev.agent)
        effect = getattr(state, "effect_ids", None)
        if isinstance(effect, dict):
            attrs[A.EFFECT_ID] = effect.get(ev.call_uuid, ev.call_uuid)
        record = req.approved.get(ev.call_uuid)
        if record is not None:
            attrs.update(decision_attrs(record, self.capture))
        if self.capture:
            attrs[A.TOOL_ARGUMENTS] = json.dumps(ev.args, ensure_ascii=False, default=str)
        self._push(req, ("tool", ev.call_uuid), f"execute_tool {ev.tool_name}", attrs)

    def _tool_end(self, req: Request, ev: Any) -> None:
        if ev.call_uuid in req.not_run:
            return
        item = self._pop(req, ("tool", ev.call_uuid))
        if item is None:
            return
        span = item.span
        error = ev.error
        replayed = item.replayed > 0 and item.ran == 0
        executed = not replayed and error not in ("dry_run", "not_found", "invalid_arguments")
        span.set_attribute(A.EXECUTED, executed)
        if replayed:
            span.set_attribute(A.REPLAYED, True)
        if error == "dry_run":
            span.set_attribute(A.DRY_RUN, True)
        elif error is not None:
            span.set_attribute(A.ERROR_TYPE, str(error))
            span.set_status(Status(StatusCode.ERROR))
        if self.capture and ev.observation is not None:
            span.set_attribute(A.TOOL_RESULT, ev.observation)
        span.end()

    def _decided(self, req: Request, ev: Any) -> None:
        """A decision applied on resume: an event, and a not-run span for a rejected or
        skipped call (a person said no: visible, never mistaken for a call not asked)."""
        record = ev.decision
        attrs = decision_attrs(record, self.capture)
        attrs[A.TOOL_NAME] = ev.tool_name
        req.top.add_event(A.DECISION_APPLIED, attrs)
        verdict = attrs[A.VERDICT]
        if verdict == "approve":
            req.approved[ev.call_uuid] = record
            return
        req.not_run.add(ev.call_uuid)
        span_attrs: dict[str, Any] = {
            A.OPERATION: "execute_tool", A.TOOL_NAME: ev.tool_name, A.TOOL_CALL_ID: ev.call_uuid,
            A.TOOL_TYPE: "function", A.CONVERSATION: ev.session_id, A.EXECUTED: False, **attrs,
        }  # fmt: skip
        state = req.session.traces.get(ev.agent)
        effect = getattr(state, "effect_ids", None)
        if isinstance(effect, dict):
            span_attrs[A.EFFECT_ID] = effect.get(ev.call_uuid, ev.call_uuid)
        parent = trace.set_span_in_context(req.top)
        span = self.tracer.start_span(
            f"execute_tool {ev.tool_name}", context=parent, kind=SpanKind.INTERNAL,
            attributes=span_attrs,
        )  # fmt: skip
        span.end()

    def _pending(self, req: Request, ev: Any) -> None:
        attrs: dict[str, Any] = {
            A.PAUSE_INTERRUPTS: [t.call_uuid for t in ev.tasks],
            A.PAUSE_TOOLS: [t.tool_name for t in ev.tasks],
        }
        if ev.reason is not None:
            attrs[A.PAUSE_REASON] = ev.reason
        req.top.add_event(A.HITL_PENDING, attrs)

    def _expired(self, req: Request, ev: Any) -> None:
        req.top.add_event(A.TASK_EXPIRED, {
            A.TARGET: ev.call_uuid, A.TOOL_NAME: ev.tool_name, A.RESOLUTION: ev.resolution,
        })  # fmt: skip

    def _approval(self, req: Request, ev: Any) -> None:
        attrs: dict[str, Any] = {A.VERDICT: str(ev.verdict).lower()}
        for key, value in ((A.REVIEWER, ev.reviewer), (A.REASON, ev.reason)):
            if value is not None:
                attrs[key] = value
        req.top.add_event(A.DECISION_RECORDED, attrs)

    def _run_end(self, req: Request, ev: Any) -> None:
        target = req.root
        for item in reversed(req.stack):
            if item.key == ("run", ev.run_id):
                target = item.span
                break
        target.set_attribute(A.ABNORMAL, bool(ev.is_abnormal))
        if self.capture and ev.content:
            target.set_attribute(A.OUTPUT_MESSAGES, output_json(ev.content, []))
