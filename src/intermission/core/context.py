"""FlowContext: the key/value data of a run plus its stop/interrupt flags and position trace."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from .._json import check_json, check_key
from .state import FlowTrace

if TYPE_CHECKING:
    from .session import AgentSession

__all__ = ["CURRENT_NODE", "GRAPH_RUNNING", "FlowContext"]

GRAPH_RUNNING = "graph_running"
"""``attrs`` key: how many graph runs are under way on the context (set by the engine)."""
CURRENT_NODE = "graph_node"
"""``attrs`` key: the id of the node the engine entered last (open_approval notes it)."""

_MISSING: Any = object()


class FlowContext(MutableMapping[str, Any]):
    """The data of one flow instance (the seed's ``FlowContext``).

    It is a mutable mapping of JSON-able values (``ctx["k"]``, ``ctx.get``, ``ctx.put``,
    ``ctx.remove``, ``"k" in ctx``) plus run control: :meth:`stop` ends the whole run,
    :meth:`interrupt` ends only the current branch, :attr:`is_stopped` reports the
    persisted stopped flag (``session.is_pending`` is exactly this flag, R2). ``trace``
    holds the recorded positions; ``session`` is the owning session (never persisted).
    """

    __slots__ = ("_data", "_interrupted", "_stopped", "attrs", "instance_id", "session", "trace")

    def __init__(self, instance_id: str = "tmp", data: dict[str, Any] | None = None) -> None:
        if not isinstance(instance_id, str):
            from ..errors import UsageError

            raise UsageError(f"instance_id is text, not {type(instance_id).__name__}")
        if data is not None:
            if not isinstance(data, dict):
                from ..errors import UsageError

                raise UsageError(f"data is a dict, not {type(data).__name__}")
            for key, value in data.items():
                _check_entry(key, value)
        self.instance_id = instance_id
        self._data: dict[str, Any] = dict(data) if data else {}
        self._stopped = False
        self._interrupted = False
        self.trace = FlowTrace()
        self.session: AgentSession | None = None
        self.attrs: dict[str, Any] = {}
        """Transient per-process attributes (never persisted)."""

    @classmethod
    def of(cls, instance_id: str = "tmp") -> FlowContext:
        """Create an empty context (the seed's ``FlowContext.of(id)``)."""
        return cls(instance_id)

    # -- data ------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        """Return the value for ``key`` or ``default`` (the seed's ``getAs``)."""
        return self._data.get(key, default)

    def put(self, key: str, value: Any) -> FlowContext:
        """Set ``key`` to ``value`` and return the context (chainable). A value no store
        can keep (not JSON: a datetime, an object, NaN) is refused here with
        NotSerializableError naming the key, and nothing changes (R28)."""
        _check_entry(key, value)
        self._data[key] = value
        return self

    def put_if_absent(self, key: str, value: Any) -> Any:
        """Set ``key`` only when it is missing; return the value now stored."""
        if key not in self._data:
            _check_entry(key, value)
        return self._data.setdefault(key, value)

    def remove(self, key: str) -> Any:
        """Remove ``key`` and return its value (None when it was missing)."""
        return self._data.pop(key, None)

    @property
    def data(self) -> dict[str, Any]:
        """The underlying dict (live, not a copy)."""
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _check_entry(key, value)
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # -- control ---------------------------------------------------------------------
    def stop(self) -> None:
        """End the whole run at the next check point; the context stays stopped (R9)."""
        self._stopped = True

    def interrupt(self) -> None:
        """End only the current branch; sibling branches go on (R9).

        The interrupted branch is parked at its node: the next ``eval`` runs that node
        again, exactly like a stopped run does.
        """
        self._interrupted = True

    @property
    def is_stopped(self) -> bool:
        """True when the run was stopped (by ``stop()`` or a session pending)."""
        return self._stopped

    def _set_stopped(self, flag: bool) -> None:
        self._stopped = flag
        if not flag:
            self._interrupted = False

    def __repr__(self) -> str:
        state = " stopped" if self._stopped else ""
        return f"<FlowContext {self.instance_id!r}{state} keys={list(self._data)[:8]}>"


def _check_entry(key: Any, value: Any) -> None:
    if not isinstance(key, str):
        from ..errors import UsageError

        raise UsageError(f"context keys are strings, not {type(key).__name__}")
    check_key("context", key)  # the loader refuses such a key: so is it here (R50)
    if type(value) not in _PLAIN:  # the common scalars need no walk
        check_json(key, value)


_PLAIN = (str, int, bool, type(None))
