"""Checkpoint history of a session (R43): where it stood at every request end (or node).

Compact by construction: the session's snapshot is the current state, and each checkpoint
keeps a *backward* patch — what to change in the next state (the next checkpoint's, or the
current one for the newest) to get its own. A checkpoint taken at a request end, saved right
after, patches nothing (``{}``); the one before it holds only what that request changed.
Reading a checkpoint's state walks the patches back from the current state.

Patches are JSON: ``{"~": {key: patch}}`` merges into an object, ``{"=": value}`` replaces,
``{"+": [items]}`` extends a list, ``{"-": 1}`` removes a key.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict

from .._json import canonical_dumps
from .._model import Model
from .session_status import SessionStatus

__all__ = [
    "Checkpoint",
    "History",
    "apply_patch",
    "core_state",
    "core_text",
    "diff",
    "take_checkpoint",
]

_MISSING: Any = object()


def diff(old: Any, new: Any) -> dict[str, Any] | None:
    """The patch turning ``old`` into ``new`` (None: equal)."""
    if old == new and type(old) is type(new):
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, Any] = {}
        for key, value in new.items():
            if key not in old:
                out[key] = {"=": value}
            else:
                sub = diff(old[key], value)
                if sub is not None:
                    out[key] = sub
        for key in old:
            if key not in new:
                out[key] = {"-": 1}
        return {"~": out}
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and len(new) > len(old)
        and new[: len(old)] == old
    ):
        return {"+": new[len(old) :]}
    return {"=": new}


def apply_patch(value: Any, patch: dict[str, Any]) -> Any:
    """``value`` with ``patch`` applied (a new object; ``value`` is not changed)."""
    if "=" in patch:
        return patch["="]
    if "+" in patch:
        return [*value, *patch["+"]]
    out = dict(value) if isinstance(value, dict) else {}
    for key, sub in patch.get("~", {}).items():
        if "-" in sub:
            out.pop(key, None)
        else:
            out[key] = apply_patch(out.get(key, _MISSING), sub)
    return out


class Checkpoint(Model):
    """A point of a session's history (R43).

    ``index`` counts checkpoints from the first one the session took; ``at`` is epoch
    milliseconds; ``status``, ``positions`` (the graph nodes where its branches stood, or a
    ReAct agent's route) and ``pending_reason`` describe it; ``events`` is how many events
    the log had then. Pass one (or its index) to ``session.fork(..., at=...)``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    at: float
    status: SessionStatus
    positions: list[str]
    pending_reason: str | None = None
    events: int


class _Mark:
    """A stored checkpoint: when, how long the log was (and its next sequence number),
    and the backward patch."""

    __slots__ = ("at", "back", "events", "seq")

    def __init__(self, at: float, events: int, seq: int, back: dict[str, Any]) -> None:
        self.at = at
        self.events = events
        self.seq = seq
        self.back = back

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "n": self.events, "seq": self.seq}
        if self.back:
            out["back"] = self.back
        return out


def core_text(session: Any) -> str:
    """What a checkpoint captures of a session (not its log, ledger or history), as
    canonical JSON text."""
    from .agent_state import state_data

    ctx = session.context
    raw = {
        "status": session.status,
        "agent": session.agent,
        "pending": ctx.is_stopped,
        "pending_reason": session.pending_reason,
        "context": ctx.data,
        "flow": {
            "root": ctx.trace.root,
            "graphs": {k: v.to_data() for k, v in ctx.trace.graphs.items()},
        },
        "traces": {k: state_data(v) for k, v in session.traces.items()},
        "hitl": session.hitl.model_dump(mode="json"),
        "messages": [m.model_dump(mode="json") for m in session.messages],
    }
    return canonical_dumps(raw)


def core_state(session: Any) -> tuple[dict[str, Any], str]:
    """:func:`core_text` and its data (fresh objects, nothing shared with the session)."""
    text = core_text(session)
    return json.loads(text), text


class History:
    """A session's checkpoints (bounded: the oldest go first)."""

    def __init__(self, max_checkpoints: int = 50) -> None:
        self.max = max_checkpoints
        self.marks: list[_Mark] = []
        self.first = 0
        """The index of the oldest checkpoint kept."""
        self._newest: dict[str, Any] | None = None
        self._anchor: str | None = None
        """The state text the newest mark's patch is relative to."""

    # -- persisted form ----------------------------------------------------------------
    def data(self) -> dict[str, Any] | None:
        """The stored form (None: no checkpoint yet)."""
        if not self.marks:
            return None
        out: dict[str, Any] = {"marks": [m.data() for m in self.marks]}
        if self.first:
            out["first"] = self.first
        if self.max != 50:
            out["max"] = self.max
        return out

    @classmethod
    def from_data(cls, data: dict[str, Any] | None, anchor: str | None) -> History:
        """Rebuild from :meth:`data`; ``anchor`` is the state text the session was stored
        with (the newest patch is relative to it)."""
        history = cls(int((data or {}).get("max", 50)))
        if data:
            history.first = int(data.get("first", 0))
            history.marks = [
                _Mark(m["at"], m["n"], m["seq"], m.get("back", {})) for m in data["marks"]
            ]
            history._anchor = anchor
        return history

    # -- taking checkpoints ------------------------------------------------------------
    def newest_state(self) -> dict[str, Any] | None:
        """The state at the newest checkpoint."""
        if not self.marks:
            return None
        if self._newest is None and self._anchor is not None:
            self._newest = apply_patch(json.loads(self._anchor), self.marks[-1].back)
        return self._newest

    def record(self, session: Any, at: float) -> None:
        """Take a checkpoint of ``session`` as it is now."""
        state, text = core_state(session)
        if self.marks:
            newest = self.newest_state()
            if newest is not None:
                self.marks[-1].back = diff(state, newest) or {}
        log = session.events
        self.marks.append(_Mark(at, len(log), log.next_seq, {}))
        self._newest, self._anchor = state, text
        if len(self.marks) > self.max:  # backward patches: the oldest simply goes
            del self.marks[0]
            self.first += 1

    def settle(self, session: Any) -> None:
        """Before a save: make the newest patch relative to the state being saved (the
        session may have changed since its last checkpoint, say by a decision)."""
        if not self.marks:
            return
        text = core_text(session)
        if text != self._anchor:
            newest = self.newest_state()
            if newest is not None:
                self.marks[-1].back = diff(json.loads(text), newest) or {}
            self._anchor = text

    # -- reading -----------------------------------------------------------------------
    def states(self, session: Any) -> list[dict[str, Any]]:
        """The state at every checkpoint kept, oldest first."""
        if not self.marks:
            return []
        newest = self.newest_state()
        if newest is None:  # (never recorded nor loaded with an anchor)
            newest = core_state(session)[0]
        out = [newest]
        for mark in reversed(self.marks[:-1]):
            out.append(apply_patch(out[-1], mark.back))
        out.reverse()
        return out

    def checkpoints(self, session: Any) -> list[Checkpoint]:
        """Every checkpoint kept, oldest first."""
        return [
            Checkpoint(
                index=self.first + i,
                at=mark.at,
                status=state["status"],
                positions=positions(state),
                pending_reason=state["pending_reason"] if state["pending"] else None,
                events=mark.events,
            )
            for i, (mark, state) in enumerate(zip(self.marks, self.states(session), strict=True))
        ]


def take_checkpoint(session: Any, *, failing: bool = False) -> None:
    """Record a request end (or a node) in ``session``'s history, if it keeps one (R43).
    ``failing``: the request is ending with an error, which a failure here must not hide."""
    record = getattr(session, "record_checkpoint", None)
    if record is None:
        return
    try:
        record()
    except Exception:
        if not failing:
            raise  # (a value no store can keep, changed in place: typed, like a save)


def positions(state: dict[str, Any]) -> list[str]:
    """Where a state stands: its root graph's branches, else its agents' routes."""
    flow = state["flow"]
    root = flow.get("root")
    if root is not None and root in flow["graphs"]:
        return list(flow["graphs"][root].get("tokens", []))
    agent = state.get("agent")
    trace = state["traces"].get(agent) if agent else None
    return [trace["route"]] if isinstance(trace, dict) and "route" in trace else []
