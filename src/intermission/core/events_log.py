"""The session's bounded event log and the per-request scope that stamps events (R24, R27)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Container, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import ValidationError

from .. import _check
from .._clock import SYSTEM_CLOCK, Clock
from .._json import canonical_dumps
from ..errors import SnapshotSchemaError
from ..events import Event, EventBase, event_adapter
from ..limits import MAX_EVENTS
from . import listeners
from .listeners import LISTENERS

if TYPE_CHECKING:
    from .session import AgentSession

__all__ = ["EventLog", "RunScope"]

E = TypeVar("E", bound=EventBase)

_PLANS: dict[type[Any], tuple[dict[str, Any], dict[str, Any]]] = {}


def _plan(cls: type[EventBase]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Static defaults and default factories of an event class (computed once)."""
    plan = _PLANS.get(cls)
    if plan is None:
        static: dict[str, Any] = {}
        factories: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            if info.default_factory is not None:
                factories[name] = info.default_factory
            elif not info.is_required():
                static[name] = info.default
        plan = _PLANS[cls] = (static, factories)
    return plan


def build_event(cls: type[E], fields: dict[str, Any]) -> E:
    """``cls.model_construct(**fields)`` without its per-call introspection.

    Events are built from our own, already-typed values on every graph step, so validation
    (and model_construct's field walk) would dominate a node's cost; this sets the same
    attributes model_construct sets.
    """
    static, factories = _plan(cls)
    values = dict(static)
    for name, factory in factories.items():
        if name not in fields:
            values[name] = factory()
    values.update(fields)
    event = cls.__new__(cls)
    object.__setattr__(event, "__dict__", values)
    object.__setattr__(event, "__pydantic_fields_set__", set(fields))
    object.__setattr__(event, "__pydantic_extra__", None)
    object.__setattr__(event, "__pydantic_private__", None)
    return event


_KINDS: dict[type[Any], str] = {}


def _kind_of(cls: type[Any]) -> str:
    """The ``kind`` tag of an event class (computed once)."""
    name = _KINDS.get(cls)
    if name is None:
        name = _KINDS[cls] = cls.model_fields["kind"].default
    return name


class Restored:
    """An event read from a snapshot, kept with its stored (JSON) form."""

    __slots__ = ("event", "raw")

    def __init__(self, event: Any, raw: dict[str, Any]) -> None:
        self.event = event
        self.raw = raw


def stored_form(item: Any) -> dict[str, Any]:
    """The stored (snapshot) form of a log item: no session id, no None fields."""
    kind = type(item)
    if kind is tuple:  # a node event recorded lazily: its fields are plain JSON
        cls, fields = item
        data = {"kind": cls.model_fields["kind"].default, **fields}
        del data["session_id"]
        return data
    if kind is Restored:  # read from a snapshot: its stored form is at hand
        raw: dict[str, Any] = item.raw
        return raw
    dumped = item.model_dump(mode="json")
    return {k: v for k, v in dumped.items() if v is not None and k != "session_id"}


class EventLog(Sequence[Event]):
    """Every event of a session across requests, oldest first, bounded by ``max_events``.

    Graph steps record node events as ``(class, fields)`` pairs and the pydantic objects are
    built the first time anyone reads the log: a run nobody looks at pays a tuple per node,
    not a model. A log loaded from a store keeps its stored JSON unparsed until it is read,
    and saving appends only the new events to that text: a resume pays for what it adds,
    not for the whole history.
    """

    def __init__(self, max_events: int = 1000) -> None:
        if max_events.__class__ is not int or not 0 <= max_events <= MAX_EVENTS:
            max_events = _check.count("max_events", max_events, 0, MAX_EVENTS)  # (the error)
        self.max_events = max_events
        self._items: deque[Any] = deque(maxlen=max_events)
        self._lazy = False
        self.next_seq = 1
        # canonical JSON of the first ``_text_n`` events (None: must be encoded again)
        self._text: str | None = "[]"
        self._text_n = 0
        # events loaded as text and not parsed yet: they come before ``_items``
        self._unparsed: str | None = None
        self._unparsed_n = 0
        self._session_id = ""
        # how many events (from the oldest) a store holds in ``_parts`` chunks; -1: unknown
        # (never saved there, trimmed or cleared since), so the next save rewrites them all
        self._saved_n = -1
        self._parts = 0
        self.stored_chars = 0
        """How long the JSON array of the events a store holds is (with
        :meth:`unsaved_chunk`, what the next save's whole log comes to: R50's limit)."""
        self.first_new_seq = 0
        """The sequence number of the first event added since this log was loaded, restored
        or last stored: what a save adds is the events from here on (see :meth:`since`)."""

    @classmethod
    def from_stored(
        cls,
        text: str,
        count: int,
        *,
        session_id: str,
        max_events: int,
        next_seq: int,
        parts: int = 0,
    ) -> EventLog:
        """A log whose ``count`` events are the stored JSON array ``text`` (parsed and
        validated when first read), held by a store in ``parts`` chunks."""
        log = cls(max_events)
        log.next_seq = next_seq
        log._session_id = session_id
        if count:
            log._unparsed, log._unparsed_n = text, count
            log._text, log._text_n = text, 0
        log.mark_stored(count, parts, len(text) if count else 0)
        return log

    def unsaved_chunk(self, max_parts: int = 64) -> tuple[bool, str, int, int]:
        """What a store that keeps the log in numbered chunks must write:
        ``(replace, text, n, part)``. ``replace``: drop the stored chunks and store
        ``text`` (the whole log, ``n`` events) anew; otherwise append ``text`` (the ``n``
        events added since the last save; ``n`` 0: nothing to write) as chunk ``part``.
        Call :meth:`mark_stored` once the write committed."""
        total = len(self)
        saved = self._saved_n
        if saved < 0 or self._parts == 0 or self._parts >= max_parts:
            return True, self.stored_json(), total, 0
        new = total - saved
        if new <= 0:
            return False, "", 0, self._parts
        items = self._items  # events added since a load are never in the unparsed prefix
        start = len(items) - new
        added = [stored_form(items[i]) for i in range(start, len(items))]
        return False, canonical_dumps(added), new, self._parts

    def mark_stored(self, count: int, parts: int, chars: int = 0) -> None:
        """Record that a store holds the first ``count`` events in ``parts`` chunks,
        ``chars`` characters of JSON together (``count`` -1: unknown, the next save
        rewrites them all)."""
        self._saved_n = count
        self._parts = parts
        self.stored_chars = chars
        self.first_new_seq = self.next_seq

    def since(self, seq: int, kinds: Container[str]) -> tuple[list[Event], set[str]]:
        """The events of ``kinds`` numbered ``seq`` or later, oldest first, and the kinds of
        every event numbered so (a scan from the newest back: what a save adds costs what
        it adds, not the whole log). Node events recorded lazily are built only when asked
        for."""
        found: list[Event] = []
        seen: set[str] = set()
        for item in reversed(self._items):  # (added events are never in the unparsed prefix)
            kind = type(item)
            if kind is tuple:
                cls, fields = item
                if fields["seq"] < seq:
                    break
                name = _kind_of(cls)
                seen.add(name)
                if name in kinds:
                    found.append(build_event(cls, fields))
                continue
            event = item.event if kind is Restored else item
            if event.seq < seq:
                break
            seen.add(event.kind)
            if event.kind in kinds:
                found.append(event)
        found.reverse()
        return found, seen

    def last(self, kinds: Container[str], before: int, test: Callable[[Any], bool]) -> Any:
        """The newest event of ``kinds`` numbered below ``before`` for which ``test`` holds,
        or None; events recorded lazily are built only when they match."""
        for item in reversed(self._items):
            kind = type(item)
            if kind is tuple:
                cls, fields = item
                if fields["seq"] < before and _kind_of(cls) in kinds:
                    event = build_event(cls, fields)
                    if test(event):
                        return event
                continue
            event = item.event if kind is Restored else item
            if event.seq < before and event.kind in kinds and test(event):
                return event
        if self._unparsed is not None:  # the stored prefix, only when the rest had none
            for event in reversed(self._events()):
                if event.seq < before and event.kind in kinds and test(event):
                    return event
        return None

    def chars_after(self, replace: bool, chunk: str) -> int:
        """How long the stored log's JSON array is once :meth:`unsaved_chunk`'s
        ``(replace, chunk)`` is written (0: no events)."""
        if replace:
            return 0 if chunk == "[]" else len(chunk)
        if not chunk:
            return self.stored_chars
        return self.stored_chars + len(chunk) - 1  # ("[a]" and "[b]" make "[a,b]")

    def _room(self) -> None:
        # called before every append: a full log drops its oldest event, which the
        # stored text still holds, so the text must be encoded again
        if self._unparsed is not None:
            if self._unparsed_n + len(self._items) < self.max_events:
                return
            self._parse()
        if len(self._items) >= self.max_events:
            self._text = None
            self._saved_n = -1

    def append(self, event: Event) -> None:
        """Add an event (the oldest is dropped when full)."""
        self._room()
        self._items.append(event)

    def append_restored(self, event: Event, raw: dict[str, Any]) -> None:
        """Add an event read from a snapshot together with its stored form."""
        self._room()
        self._items.append(Restored(event, raw))
        self._lazy = True

    def append_lazy(self, cls: type[EventBase], fields: dict[str, Any]) -> None:
        """Add an event to be built when the log is read."""
        self._room()
        self._items.append((cls, fields))
        self._lazy = True

    def _parse(self) -> None:
        """Validate the stored prefix and put it in front of the newer events."""
        text, self._unparsed = self._unparsed, None
        if text is None:
            return
        try:
            raws = json.loads(text)
        except ValueError as exc:
            raise SnapshotSchemaError(f"not valid JSON: {exc}", path="events") from None
        if not isinstance(raws, list):
            raise SnapshotSchemaError("the event log is a JSON array", path="events")
        sid = self._session_id
        parsed = []
        for i, raw in enumerate(raws):
            try:
                event = event_adapter.validate_python({"session_id": sid, **raw})
            except (ValidationError, TypeError) as exc:
                detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                raise SnapshotSchemaError(detail, path=f"events.{i}") from None
            parsed.append(Restored(event, raw))
        total = len(parsed) + len(self._items)
        self._items = deque([*parsed, *self._items], maxlen=self.max_events)
        self._lazy = True
        self._unparsed_n = 0
        if total > self.max_events:
            self._text = None
            self._saved_n = -1
        else:
            self._text_n += len(parsed)

    def _events(self) -> deque[Any]:
        if self._unparsed is not None:
            self._parse()
        if self._lazy:
            self._items = deque(
                (_materialize(item) for item in self._items), maxlen=self.max_events
            )
            self._lazy = False
        return self._items

    def stored_forms(self) -> list[dict[str, Any]]:
        """Every event in its stored form (see :func:`stored_form`)."""
        if self._unparsed is not None:
            self._parse()
        return [stored_form(item) for item in self._items]

    def stored_json(self) -> str:
        """The canonical JSON array of the log; only events added since the last call are
        encoded (the rest of the text is kept from the last call or from the store)."""
        text = self._text
        if text is None:
            text = canonical_dumps(self.stored_forms())
            self._text, self._text_n = text, len(self._items)
            return text
        new = len(self._items) - self._text_n
        if new <= 0:
            return text
        items = self._items
        added = canonical_dumps([stored_form(items[i]) for i in range(self._text_n, len(items))])
        text = added if text == "[]" else f"{text[:-1]},{added[1:]}"
        self._text, self._text_n = text, len(items)
        return text

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        items = self._events()
        if isinstance(index, slice):
            return list(items)[index]
        event: Event = items[index]
        return event

    def __len__(self) -> int:
        return self._unparsed_n + len(self._items)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events())

    def kinds(self) -> list[str]:
        """The ``kind`` of every event, in order (handy in tests and notebooks)."""
        return [e.kind for e in self._events()]

    def to_jsonl(self) -> str:
        """Export as JSON lines (one event per line)."""
        return "".join(e.model_dump_json() + "\n" for e in self._events())

    def clear(self) -> None:
        """Drop all events (sequence numbers keep counting)."""
        self._items.clear()
        self._lazy = False
        self._unparsed, self._unparsed_n = None, 0
        self._text, self._text_n = "[]", 0
        self._saved_n = -1

    def __repr__(self) -> str:
        return f"<EventLog {len(self)} events>"


def _materialize(item: Any) -> Any:
    kind = type(item)
    if kind is tuple:
        return build_event(*item)
    if kind is Restored:
        return item.event
    return item


class RunScope:
    """One request's identity: stamps events with run id, agent, session, seq and time,
    appends them to the session log and forwards them to a stream sink.

    ``pacer`` (set by a stream) is awaited at the run's check points: it returns once the
    reader has taken every event so far and asked for the next, so a run never gets ahead
    of its reader (R41)."""

    __slots__ = ("agent", "clock", "log", "pacer", "run_id", "session", "session_id", "sink")

    def __init__(
        self,
        run_id: str,
        agent: str,
        session: AgentSession,
        clock: Clock | None = None,
        sink: Callable[[Event], None] | None = None,
        pacer: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.agent = agent
        self.session = session
        self.session_id = session.session_id
        self.log: EventLog = session.events
        self.clock = clock or getattr(session, "clock", None) or SYSTEM_CLOCK
        self.sink = sink
        self.pacer = pacer

    async def pace(self) -> None:
        """A check point: wait here until the stream's reader wants the next event."""
        if self.pacer is not None:
            await self.pacer()

    def child(self, run_id: str, agent: str) -> RunScope:
        """A scope for a member agent that shares this scope's log, clock and sink."""
        scope = RunScope.__new__(RunScope)
        scope.run_id = run_id
        scope.agent = agent
        scope.session = self.session
        scope.session_id = self.session_id
        scope.log = self.log
        scope.clock = self.clock
        scope.sink = self.sink
        scope.pacer = self.pacer
        return scope

    def node_event(
        self, cls: type[EventBase], graph_id: str, node_id: str, kind: str, started: float = -1.0
    ) -> float:
        """Record a NodeStart (``started`` < 0) or NodeEnd event without building it now
        (a stream still gets it built); returns the event's time."""
        ts = self.clock.now_ms()
        log = self.log
        seq = log.next_seq
        log.next_seq = seq + 1
        fields = {
            "run_id": self.run_id, "agent": self.agent, "session_id": self.session_id,
            "seq": seq, "ts": ts, "graph_id": graph_id, "node_id": node_id, "node_kind": kind,
        }  # fmt: skip
        if started >= 0:
            fields["duration_ms"] = ts - started
        told = bool(LISTENERS) and listeners.wants_node_events(self.session)
        if self.sink is not None or told:  # (someone reads it now: build it now)
            event = build_event(cls, fields)
            log.append(event)  # type: ignore[arg-type]
            if self.sink is not None:
                self.sink(event)  # type: ignore[arg-type]
            if told:
                listeners.event(self.session, event)
        else:
            log.append_lazy(cls, fields)
        return ts

    def emit(self, cls: type[E], **fields: Any) -> E:
        """Build an event of ``cls``, record it and forward it to the sink."""
        log = self.log
        seq = log.next_seq
        log.next_seq = seq + 1
        fields["run_id"] = self.run_id
        fields["agent"] = self.agent
        fields["session_id"] = self.session_id
        fields["seq"] = seq
        fields["ts"] = self.clock.now_ms()
        event = build_event(cls, fields)
        log.append(event)  # type: ignore[arg-type]
        if self.sink is not None:
            self.sink(event)  # type: ignore[arg-type]
        if LISTENERS:
            listeners.event(self.session, event)
        return event
