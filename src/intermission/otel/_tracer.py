"""The listener that turns what the core emits into spans.

Each top-level request on a session is one trace (or a child of the caller's span): a
root ``invoke_agent``/``invoke_workflow`` span and, under it, a stack of open spans —
member agents, graph nodes, model calls, tool calls — pushed and popped by the request's
events. Parallel branches run one node at a time, so their spans are siblings. At the
request's end whatever is still open ends (a node the pause stopped in says it did not
complete), the pause is recorded, and the root's context is kept in the session for the
next request to link to.

A pause is traced only once it is on record. A session that belongs to a store (loaded
from one, or saved once) is on record only when its next save commits: a stale copy that
pauses, then loses compare-and-set, paused in nobody's record. So the root of such a
request is held, ended at its own time but only once the store tells how the save ended
(:func:`~intermission.core.listeners.saved`): with its pause events when it committed,
without them (``intermission.session.saved`` false) when it lost or never happened.
Decisions noted on such a copy outside a request wait for its save the same way. A
session of no store (in memory, a notebook's) is traced at once, as before.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from time import time_ns
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .._version import __version__
from ..core import listeners
from . import _pause
from . import attributes as A
from ._decisions import note_attrs
from ._event_spans import EventSpans
from ._naming import agent_of, messages_json, model_of, provider_of
from ._shapes import Held, Request, UserMessage, fail, on_record_later

__all__ = ["Tracing"]


_LIVE: weakref.WeakSet[Tracing] = weakref.WeakSet()


def _release_everywhere() -> None:
    # registered when tracing is first imported, after the provider it exports to was
    # made: at exit, this runs before that provider's last flush (atexit runs newest first)
    for tracing in list(_LIVE):
        tracing._release_all()


atexit.register(_release_everywhere)


class Tracing(EventSpans):
    """Spans for every request of this process (see :func:`intermission.otel.instrument`)."""

    def __init__(self, provider: Any, *, capture_content: bool, experimental: bool,
                 node_spans: bool = False) -> None:  # fmt: skip
        source = provider if provider is not None else trace.get_tracer_provider()
        self.tracer = source.get_tracer("intermission", __version__)
        self.capture = capture_content
        self.experimental = experimental
        self.node_spans = node_spans
        """A span per graph node (asked for): off, a node costs the tracer nothing."""
        self._requests: dict[int, Request] = {}
        """Requests in flight by their session object (two copies of one session, loaded
        twice and run at once, are two requests)."""
        self._held: dict[int, Held] = {}
        """Store copies' pauses and decisions waiting for their save, by session object."""
        self._lock = threading.RLock()  # (a finalizer may run in a collection under it)
        self._retired = False
        """Switched off: only the requests in flight are followed, to their end."""
        _LIVE.add(self)

    # -- the listener -------------------------------------------------------------------
    def on_event(self, session: Any, ev: Any) -> None:
        """Route one event (see :class:`~intermission.core.listeners.Listener`)."""
        kind = ev.kind
        req = self._requests.get(id(session))
        if req is None and self._retired:
            return
        if kind in ("run_start", "team_start"):
            if req is None:
                self._begin(session, ev, kind)
            else:
                self._member(req, ev, kind)
            return
        if req is None:
            if kind == "node_start":  # a graph evaluated on its own (FlowEngine.eval)
                req = self._begin(session, ev, "graph")
            else:
                self._outside(session, ev)
                return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, req, ev)

    def wants_node_events(self, session: Any) -> bool:
        """Node events only for node spans, or to begin the trace of a graph evaluated on
        its own (its first node starts its request): otherwise a node costs nothing."""
        return self.node_spans or (id(session) not in self._requests and not self._retired)

    def on_note(self, session: Any, entry: Any) -> None:
        """An audit entry: an event on the request's current span, or a span of its own."""
        action = str(getattr(entry, "action", ""))
        if action.startswith("effect."):
            return  # (effects are told by the ledger, without their keys)
        req = self._requests.get(id(session))
        if req is None and self._retired:
            return
        attrs = note_attrs(entry, self.capture)
        name = "intermission." + action
        if req is not None:
            req.top.add_event(name, attrs)
        else:
            # a refusal changes nothing and is written to the trail at once; anything else
            # noted outside a request is on record with the session's next save
            self._instant(session, name, attrs, on_record=action == "decision.refused")

    def on_effect(self, session: Any, key: str, outcome: str) -> None:
        """The ledger ran an effect or returned its recorded result (the key stays here)."""
        req = self._requests.get(id(session))
        if req is None:
            return
        if req.stack:
            top = req.stack[-1]
            if outcome == "replayed":
                top.replayed += 1
            else:
                top.ran += 1
        req.top.add_event(A.EFFECT_REPLAYED if outcome == "replayed" else A.EFFECT_RAN)

    def on_end(self, session: Any, error: BaseException | None) -> None:
        """The request ended: close its spans, record a pause, keep the root's context."""
        with self._lock:
            req = self._requests.pop(id(session), None)
        if req is None:
            self._stop_if_idle()
            return
        failed = isinstance(error, Exception)
        while req.stack:
            item = req.stack.pop()
            if item.key[0] == "node":
                item.span.set_attribute(A.NODE_COMPLETED, False)
            if failed:
                fail(item.span, error)
            item.span.end()
        root = req.root
        status = str(getattr(session, "status", ""))
        root.set_attribute(A.STATUS, status)
        pause_id: str | None = None
        if failed:
            fail(root, error)
        elif error is not None:
            root.set_attribute(A.CANCELLED, True)
        pause: list[tuple[str, dict[str, Any]]] = []
        if not failed and getattr(session, "is_pending", False):
            pause_id = _pause.new_pause_id()
            attrs, interrupts = _pause.pause_record(session)
            pause.append((A.PAUSE_EVENT, {A.PAUSE_ID: pause_id, **attrs}))
            if self.experimental:
                reason = "human_input" if interrupts else "_OTHER"
                common = {A.EXECUTION_ID: session.session_id, A.GEN_PAUSE_ID: pause_id}
                pause.append((A.PAUSED, {**common, A.GEN_PAUSE_REASON: reason}))
                checkpoint = _pause.checkpoint_id(session)
                if checkpoint is not None:
                    pause.append((A.CHECKPOINTED, {**common, A.CHECKPOINT_ID: checkpoint}))
        _pause.write_record(session, root, status, pause_id)  # (saved with the session)
        self._unfocus(req)
        if pause and on_record_later(session):
            held = self._hold(session)
            held.root, held.end_ns, held.pause = root, time_ns(), pause
        else:
            for name, attrs in pause:
                root.add_event(name, attrs)
            root.end()
        self._stop_if_idle()

    def on_saved(self, session: Any, committed: bool) -> None:
        """A store's save of ``session`` committed, or lost: report what waited for it."""
        with self._lock:
            held = self._held.pop(id(session), None)
        if held is not None:
            held.gone.detach()
            self._release(held, committed)
        self._stop_if_idle()

    def retire(self) -> None:
        """Switched off: start nothing new, follow the requests in flight to their end
        (and the pauses held for a save to that save) and stop listening then (ending
        their spans now would leave the innermost one current in the context each
        request runs in: a later span, of any session, would nest under it)."""
        with self._lock:
            self._retired = True
        self._stop_if_idle()

    def _stop_if_idle(self) -> None:
        with self._lock:
            idle = self._retired and not self._requests and not self._held
        if idle:
            listeners.remove(self)  # switched off, and nothing of its is in flight

    def take_over(self, old: Tracing) -> None:
        """Follow ``old``'s requests in flight from now on (instrument() called again)."""
        listeners.remove(old)
        with old._lock:
            moved, old._requests = old._requests, {}
            kept, old._held = old._held, {}
            old._retired = True
        with self._lock:
            for key, req in moved.items():
                self._requests.setdefault(key, req)
            for key, held in kept.items():
                session = held.ref()
                if session is not None and key not in self._held:
                    held.gone.detach()  # (the old one's finalizer: now this one's)
                    held.gone = weakref.finalize(session, self._dropped, key)
                    self._held[key] = held

    # -- what waits for a save ------------------------------------------------------------
    def _hold(self, session: Any) -> Held:
        """What waits for ``session``'s next save (made on first use)."""
        key = id(session)
        with self._lock:
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = Held(ref=weakref.ref(session))
                held.gone = weakref.finalize(session, self._dropped, key)
        return held

    def _release(self, held: Held, on_record: bool) -> None:
        """Report what waited: as on record (the save committed), or not (lost, never)."""
        if on_record:
            for make in held.instants:
                make()
        root = held.root
        if root is None:
            return
        if on_record:
            for name, attrs in held.pause:
                root.add_event(name, attrs, timestamp=held.end_ns)
        else:
            root.set_attribute(A.SAVED, False)
        root.end(end_time=held.end_ns)

    def _dropped(self, key: int) -> None:
        """A held copy was dropped without being saved: nothing of it is on record."""
        with self._lock:
            held = self._held.pop(key, None)
        if held is not None:
            self._release(held, False)
        self._stop_if_idle()

    def _release_all(self) -> None:
        """At exit (before the provider's last flush): copies never saved are on no record."""
        with self._lock:
            everything, self._held = list(self._held.values()), {}
        for held in everything:
            held.gone.detach()
            self._release(held, False)

    # -- requests -------------------------------------------------------------------------
    def _begin(self, session: Any, ev: Any, kind: str) -> Request:
        """A top-level request: its root span, linked to where the session stood."""
        with self._lock:
            held = self._held.pop(id(session), None)
        if held is not None:  # resumed from a pause this process holds, unsaved in between:
            held.gone.detach()  # the pause it continues from is reported with it
            self._release(held, True)
        sid = session.session_id
        if kind == "run_start":
            name = ev.agent
            op, title, who = "invoke_agent", f"invoke_agent {name}", A.AGENT_NAME
        else:
            name = ev.agent if kind == "team_start" else ev.graph_id
            op, title, who = "invoke_workflow", f"invoke_workflow {name}", A.WORKFLOW_NAME
        model = getattr(agent_of(session, ev.agent), "model", None)
        attrs: dict[str, Any] = {
            A.OPERATION: op, who: name, A.CONVERSATION: sid, A.PROVIDER: provider_of(model),
            A.RUN_ID: ev.run_id,
        }  # fmt: skip
        if kind == "team_start":
            attrs[A.AGENT_NAME] = name
        requested = model_of(model)
        if requested is not None:
            attrs[A.REQUEST_MODEL] = requested
        new_prompt = kind != "graph" and getattr(ev, "prompt", None) is not None
        attrs[A.REQUEST_KIND] = (
            "prompt" if new_prompt else "resume" if kind != "graph" else "continue"
        )
        links = []
        record = _pause.read_record(session)
        resumed_from: tuple[str, str] | None = None
        if record is not None and record.get("session") != sid:
            links.append(_pause.link_to(record, "fork"))  # the fork's first request
            parent = getattr(session, "parent", None)
            if isinstance(parent, tuple) and len(parent) == 2:
                attrs[A.FORK_PARENT] = str(parent[0])
                attrs[A.FORK_CHECKPOINT] = int(parent[1])
                resumed_from = ("checkpoint", f"{parent[0]}#{parent[1]}")
        elif record is not None and not new_prompt and record.get("status") in (
            "pending", "paused", "failed",
        ):  # fmt: skip
            links.append(_pause.link_to(record, "resume"))
            if isinstance(record.get("pause"), str):
                attrs[A.PAUSE_ID] = record["pause"]
                resumed_from = ("pause", record["pause"])
            at = record.get("at")
            if isinstance(at, (int, float)):
                attrs[A.PAUSE_WAIT] = max(0.0, float(session.clock.now_ms()) - float(at))
        if links:
            linked = links[0]
            attrs[A.LINK_TYPE] = (linked.attributes or {}).get(A.LINK_TYPE, "resume")
            attrs[A.LINKED_TRACE] = format(linked.context.trace_id, "032x")
            attrs[A.LINKED_SPAN] = format(linked.context.span_id, "016x")
        root = self.tracer.start_span(
            title, kind=SpanKind.INTERNAL, attributes=attrs, links=links,
            context=otel_context.get_current(),
        )  # fmt: skip
        if self.experimental and resumed_from is not None and not new_prompt:
            root.add_event(A.RESUMED, {
                A.EXECUTION_ID: sid, A.RESUMED_FROM_TYPE: resumed_from[0],
                A.RESUMED_FROM_ID: resumed_from[1],
                **({A.GEN_PAUSE_ID: resumed_from[1]} if resumed_from[0] == "pause" else {}),
            })  # fmt: skip
        if self.capture and kind == "run_start" and ev.prompt:
            root.set_attribute(A.INPUT_MESSAGES, messages_json([UserMessage(ev.prompt)]))
        req = Request(root=root, session=session)
        with self._lock:
            self._requests[id(session)] = req
        self._focus(req)
        return req

    def _member(self, req: Request, ev: Any, kind: str) -> None:
        """A member agent (or team) running inside a team's request."""
        model = getattr(agent_of(req.session, ev.agent), "model", None)
        op = "invoke_agent" if kind == "run_start" else "invoke_workflow"
        attrs: dict[str, Any] = {
            A.OPERATION: op, A.AGENT_NAME: ev.agent, A.CONVERSATION: ev.session_id,
            A.PROVIDER: provider_of(model), A.RUN_ID: ev.run_id,
        }  # fmt: skip
        if kind == "team_start":
            attrs[A.WORKFLOW_NAME] = ev.agent
        requested = model_of(model)
        if requested is not None:
            attrs[A.REQUEST_MODEL] = requested
        self._push(req, ("run", ev.run_id), f"{op} {ev.agent}", attrs)

    def _outside(self, session: Any, ev: Any) -> None:
        """An event recorded outside any request of this process (a reviewer's decision
        on a graph approval, a deadline swept): a span of its own."""
        if ev.kind == "approval_decided":
            attrs = {
                A.VERDICT: str(ev.verdict).lower(), A.ACTION: "decision.recorded",
            }  # fmt: skip
            for key, value in ((A.REVIEWER, ev.reviewer), (A.REASON, ev.reason)):
                if value is not None:
                    attrs[key] = value
            self._instant(session, A.DECISION_RECORDED, attrs)

    def _instant(
        self, session: Any, name: str, attrs: dict[str, Any], *, on_record: bool = False
    ) -> None:
        """A span that only carries an event, linked to where the session stood; on a
        store's copy, made once its save committed (``on_record``: it is already)."""
        sid = getattr(session, "session_id", "")
        record = _pause.read_record(session)
        links = [_pause.link_to(record, "resume")] if record is not None else []
        at = time_ns()

        def make() -> None:
            span = self.tracer.start_span(
                name, kind=SpanKind.INTERNAL, links=links, start_time=at,
                attributes={A.CONVERSATION: sid,
                            **{k: v for k, v in attrs.items() if k != A.ACTION}},
            )  # fmt: skip
            span.add_event(name, attrs, timestamp=at)
            span.end(end_time=at)

        if on_record or not on_record_later(session):
            make()
        else:
            self._hold(session).instants.append(make)

_HANDLERS = {
    "node_start": Tracing._node_start,
    "node_end": Tracing._node_end,
    "reason_start": Tracing._reason_start,
    "reason_end": Tracing._reason_end,
    "tool_call_start": Tracing._tool_start,
    "tool_call_end": Tracing._tool_end,
    "hitl_decided": Tracing._decided,
    "hitl_pending": Tracing._pending,
    "hitl_expired": Tracing._expired,
    "approval_decided": Tracing._approval,
    "run_end": Tracing._run_end,
    "team_end": Tracing._run_end,
}
