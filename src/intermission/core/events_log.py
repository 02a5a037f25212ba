"""The session's bounded event log and the per-request scope that stamps events (R24, R27)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .._clock import SYSTEM_CLOCK, Clock
from ..events import Event, EventBase

if TYPE_CHECKING:
    from .session import AgentSession

__all__ = ["EventLog", "RunScope"]

E = TypeVar("E", bound=EventBase)


class EventLog(Sequence[Event]):
    """Every event of a session across requests, oldest first, bounded by ``max_events``."""

    def __init__(self, max_events: int = 1000) -> None:
        self.max_events = max_events
        self._items: deque[Event] = deque(maxlen=max_events)
        self.next_seq = 1

    def append(self, event: Event) -> None:
        """Add an event (the oldest is dropped when full)."""
        self._items.append(event)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return list(self._items)[index]
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._items)

    def kinds(self) -> list[str]:
        """The ``kind`` of every event, in order (handy in tests and notebooks)."""
        return [e.kind for e in self._items]

    def to_jsonl(self) -> str:
        """Export as JSON lines (one event per line)."""
        return "".join(e.model_dump_json() + "\n" for e in self._items)

    def clear(self) -> None:
        """Drop all events (sequence numbers keep counting)."""
        self._items.clear()

    def __repr__(self) -> str:
        return f"<EventLog {len(self)} events>"


class RunScope:
    """One request's identity: stamps events with run id, agent, session, seq and time,
    appends them to the session log and forwards them to a stream sink."""

    __slots__ = ("agent", "clock", "log", "run_id", "session_id", "sink")

    def __init__(
        self,
        run_id: str,
        agent: str,
        session: AgentSession,
        clock: Clock | None = None,
        sink: Callable[[Event], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.agent = agent
        self.session_id = session.session_id
        self.log: EventLog = session.events
        self.clock = clock or getattr(session, "clock", None) or SYSTEM_CLOCK
        self.sink = sink

    def child(self, run_id: str, agent: str) -> RunScope:
        """A scope for a member agent that shares this scope's log, clock and sink."""
        scope = RunScope.__new__(RunScope)
        scope.run_id = run_id
        scope.agent = agent
        scope.session_id = self.session_id
        scope.log = self.log
        scope.clock = self.clock
        scope.sink = self.sink
        return scope

    def emit(self, cls: type[E], **fields: Any) -> E:
        """Build an event of ``cls``, record it and forward it to the sink."""
        log = self.log
        seq = log.next_seq
        log.next_seq = seq + 1
        # model_construct: the fields come from our own code, and validation per event
        # would dominate the per-node cost of a graph step.
        event = cls.model_construct(
            run_id=self.run_id,
            agent=self.agent,
            session_id=self.session_id,
            seq=seq,
            ts=self.clock.now_ms(),
            **fields,
        )
        log.append(event)  # type: ignore[arg-type]
        if self.sink is not None:
            self.sink(event)  # type: ignore[arg-type]
        return event
