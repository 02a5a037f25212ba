"""Checkpoint history of a session (R43): where it stood at every request end (or node).

Compact by construction: the session's snapshot is the current state, and each checkpoint
keeps a *backward* patch — what to change in the next state (the next checkpoint's, or the
current one for the newest) to get its own. A checkpoint taken at a request end, saved right
after, patches nothing (``{}``); the one before it holds only what that request changed.
Reading a checkpoint's state walks the patches back from the current state.

Patches are JSON, shaped for cheap encoding (few objects): an object merges key by key
into an object; a list is a leaf — ``[]`` removes the key, ``[value]`` replaces,
``["+", items]`` extends a list, ``["~", segments]`` rebuilds one from slices of it and new
items (a list that grew or shrank costs what changed, not the list). The patch of a whole
state is always an object. Values compare exactly (R50): ``1``, ``1.0`` and ``True`` differ
at every depth.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict

from .._json import canonical_dumps
from .._model import Model
from ..errors import SnapshotSchemaError
from ..limits import MAX_DEPTH
from .session_status import SessionStatus

__all__ = [
    "CORE_KEYS",
    "Checkpoint",
    "History",
    "apply_patch",
    "check_patch",
    "core_text",
    "core_values",
    "diff",
    "same",
    "take_checkpoint",
]

_MISSING: Any = object()
_SCALAR_TYPES = (str, int, float, bool, type(None))
_SPLICE_MIN = 2
"""Lists shorter than this are replaced whole: a splice would not be smaller."""
_MATCH_MAX = 4000
"""Lists longer than this are spliced by common head and tail only (no matching in
between, which costs up to the product of the lengths)."""


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same value: ``==`` with JSON types kept at every
    depth (``1``, ``1.0`` and ``True`` differ, ``{"n": 1}`` and ``{"n": True}`` too)."""
    if type(a) is not type(b) or a != b:
        return False
    if isinstance(a, _SCALAR_TYPES):
        return not isinstance(a, float) or repr(a) == repr(b)  # (0.0 and -0.0)
    # equal containers: compare their JSON texts, which spell every type out (C speed;
    # only values found equal get here, so a whole state is dumped at most once)
    return _exact(a) == _exact(b)


def _exact(value: Any) -> str:
    return canonical_dumps(value)


def diff(old: Any, new: Any) -> Any:
    """The patch turning ``old`` into ``new`` (None: the same value; an object when both
    are objects)."""
    if same(old, new):
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, Any] = {}
        for key, value in new.items():
            if key not in old:
                out[key] = [value]
            else:
                sub = diff(old[key], value)
                if sub is not None:
                    out[key] = sub
        for key in old:
            if key not in new:
                out[key] = []
        return out
    if isinstance(old, list) and isinstance(new, list):
        return _list_patch(old, new)
    return [new]


def _list_patch(old: list[Any], new: list[Any]) -> list[Any]:
    """A list's patch, costing what changed: ``["~", segments]`` builds ``new`` from
    slices ``[start, stop]`` of ``old`` and literal runs ``[[items]]`` (an append, a
    truncation, a window that slid as the oldest messages went), else ``[new]``."""
    if len(new) < _SPLICE_MIN and len(old) < _SPLICE_MIN:
        return [new]
    ops = _fast_opcodes(old, new)
    if ops is None:  # (values Python calls equal but JSON does not: match their texts)
        ops = _opcodes([_exact(x) for x in old], [_exact(x) for x in new])
    segments: list[list[Any]] = []
    kept = 0
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            segments.append([i1, i2])
            kept += i2 - i1
        elif j2 > j1:
            if segments and len(segments[-1]) == 1:
                segments[-1][0].extend(new[j1:j2])
            else:
                segments.append([new[j1:j2]])
    if not kept:
        return [new]
    if len(segments) == 2 and segments[0] == [0, len(old)]:
        return ["+", segments[1][0]]  # (an extension: the original form)
    return ["~", segments]


Opcode = tuple[str, int, int, int, int]


def _fast_opcodes(old: list[Any], new: list[Any]) -> list[Opcode] | None:
    """What a session does to its lists — common head and tail (appends, truncations,
    edits at one end), else a run of ``old`` found again in ``new`` (a window that slid)
    — matched with ``==`` and then checked exactly, one dump per matched run (None: a
    match that is not exact; the caller matches the items' texts instead)."""
    ops = _opcodes(old, new, slide=True)
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" and _exact(old[i1:i2]) != _exact(new[j1:j2]):
            return None
    return ops


def _opcodes(a: list[Any], b: list[Any], *, slide: bool = False) -> list[Opcode]:
    # common head and tail first; between them, a run of ``a`` found again in ``b``
    # (``slide``), or difflib's matching (``a``/``b`` are the items' texts then)
    head = 0
    most = min(len(a), len(b))
    while head < most and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < most - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    ops: list[Opcode] = []
    if head:
        ops.append(("equal", 0, head, 0, head))
    ea, eb = len(a) - tail, len(b) - tail
    if head < ea and head < eb:
        if slide:
            ops += _slid(a, b, head, ea, head, eb)
        elif (ea - head) + (eb - head) <= _MATCH_MAX:
            from difflib import SequenceMatcher

            matcher = SequenceMatcher(None, a[head:ea], b[head:eb], autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                ops.append((tag, head + i1, head + i2, head + j1, head + j2))
        else:
            ops.append(("replace", head, ea, head, eb))
    elif head < ea or head < eb:
        ops.append(("replace", head, ea, head, eb))
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return ops


def _slid(a: list[Any], b: list[Any], i1: int, i2: int, j1: int, j2: int) -> list[Opcode]:
    """``a[i1:i2]`` against ``b[j1:j2]``: the longest run that starts ``a``'s part and is
    found in ``b``'s, or the run that starts ``b``'s and is found in ``a``'s."""
    best: tuple[int, int, int] = (0, i1, j1)  # (length, start in a, start in b)
    for first, other, lo, hi, flip in ((a[i1], b, j1, j2, False), (b[j1], a, i1, i2, True)):
        for k in range(lo, hi):
            if other[k] == first:
                x, y = (k, j1) if flip else (i1, k)
                n = 0
                while x + n < i2 and y + n < j2 and a[x + n] == b[y + n]:
                    n += 1
                if n > best[0]:
                    best = (n, x, y)
                break
    n, x, y = best
    if not n:
        return [("replace", i1, i2, j1, j2)]
    out: list[Opcode] = []
    if x > i1 or y > j1:
        out.append(("replace", i1, x, j1, y))
    out.append(("equal", x, x + n, y, y + n))
    if x + n < i2 or y + n < j2:
        out.append(("replace", x + n, i2, y + n, j2))
    return out


def apply_patch(value: Any, patch: Any) -> Any:
    """``value`` with ``patch`` applied (a new object; ``value`` is not changed)."""
    if isinstance(patch, list):
        if len(patch) == 1:
            return patch[0]
        if patch[0] == "+":
            return [*value, *patch[1]]
        if not isinstance(value, list):
            raise TypeError(f"a list patch applied to {type(value).__name__}")
        out_list: list[Any] = []
        for segment in patch[1]:
            if len(segment) == 1:
                out_list.extend(segment[0])
            else:
                start, stop = segment
                if stop > len(value):
                    raise IndexError(f"slice [{start}:{stop}] of a list of {len(value)}")
                out_list.extend(value[start:stop])
        return out_list
    out = dict(value) if isinstance(value, dict) else {}
    for key, sub in patch.items():
        if sub == []:
            out.pop(key, None)
        else:
            out[key] = apply_patch(out.get(key, _MISSING), sub)
    return out


def _segment_wrong(segment: Any) -> str | None:
    if isinstance(segment, list) and len(segment) == 1 and isinstance(segment[0], list):
        return None
    if (
        isinstance(segment, list)
        and len(segment) == 2
        and all(type(x) is int for x in segment)
        and 0 <= segment[0] <= segment[1]
    ):
        return None
    return "a list segment is [start, stop] or [[items]]"


def check_patch(patch: Any, depth: int = 0) -> str | None:
    """What is wrong with a stored patch (None: it is well formed)."""
    if depth > MAX_DEPTH + 8:  # (a state nests a few levels above its values)
        return "nested too deeply"
    if isinstance(patch, list):
        if len(patch) <= 1 or (len(patch) == 2 and patch[0] == "+" and isinstance(patch[1], list)):
            return None
        if len(patch) == 2 and patch[0] == "~" and isinstance(patch[1], list):
            for segment in patch[1]:
                wrong = _segment_wrong(segment)
                if wrong is not None:
                    return wrong
            return None
        return (
            f'a patch leaf is [], [value], ["+", items] or ["~", segments], not a list of '
            f"{len(patch)}"
        )
    if not isinstance(patch, dict):
        return f"a patch is an object or a list, not {type(patch).__name__}"
    for sub in patch.values():
        wrong = check_patch(sub, depth + 1)
        if wrong is not None:
            return wrong
    return None


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

    __slots__ = ("_back", "_text", "at", "events", "seq")

    def __init__(self, at: float, events: int, seq: int, back: dict[str, Any]) -> None:
        self.at = at
        self.events = events
        self.seq = seq
        self._back = back
        self._text: str | None = None

    @property
    def back(self) -> dict[str, Any]:
        return self._back

    @back.setter
    def back(self, patch: dict[str, Any]) -> None:
        self._back = patch
        self._text = None

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "n": self.events, "seq": self.seq}
        if self._back:
            out["back"] = self._back
        return out

    def text(self) -> str:
        """:meth:`data` as canonical JSON, dumped once (a mark changes rarely: only the
        newest one's patch, while the session moves on)."""
        if self._text is None:
            self._text = canonical_dumps(self.data())
        return self._text


CORE_KEYS = frozenset(
    {"agent", "agent_fingerprint", "agent_version", "context", "flow", "hitl", "messages",
     "pending", "pending_reason", "requester", "status", "traces"}
)  # fmt: skip
"""The snapshot keys a checkpoint captures (not the log, ledger, history or limits)."""


def core_values(session: Any) -> dict[str, Any]:
    """Each captured key that is not at its default, with its JSON value (the session's
    own objects where it keeps them as JSON — read them, never keep them)."""
    from .agent_state import state_data

    ctx = session.context
    values: dict[str, Any] = {}
    if session.agent is not None:
        values["agent"] = session.agent
    fingerprint = session.agent_fingerprint
    if fingerprint is not None:
        values["agent_fingerprint"] = fingerprint
    version = getattr(session, "agent_version", None)
    if version is not None:
        values["agent_version"] = version
    if ctx.data:
        values["context"] = ctx.data
    trace = ctx.trace
    if trace.root is not None or trace.graphs:
        values["flow"] = {
            "root": trace.root, "graphs": {k: v.to_data() for k, v in trace.graphs.items()}
        }  # fmt: skip
    hitl = session.hitl
    if (hitl.agent is not None or hitl.tasks or hitl.decisions or hitl.expired
            or hitl.approval_keys is not None):  # fmt: skip
        values["hitl"] = hitl.model_dump(mode="json")
    if session.messages:
        values["messages"] = [m.model_dump(mode="json") for m in session.messages]
    if ctx.is_stopped:
        values["pending"] = True
    if session.pending_reason is not None:
        values["pending_reason"] = session.pending_reason
    requester = getattr(session, "requester", None)
    if requester is not None:
        values["requester"] = requester.model_dump(mode="json")
    if session.status != "new":
        values["status"] = session.status
    if session.traces:
        values["traces"] = {k: state_data(v) for k, v in session.traces.items()}
    return values


def core_text(session: Any) -> str:
    """What a checkpoint captures of a session, as canonical JSON text (defaults left out,
    as in a snapshot; the snapshot's first part is this very text)."""
    return canonical_dumps(core_values(session))


def _core_of(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in snapshot.items() if k in CORE_KEYS}


class History:
    """A session's checkpoints (bounded: the oldest go first).

    Work is kept off the hot path: a checkpoint dumps the captured state once; a save
    right after it compares texts (the save dumps the same parts anyway); a loaded
    session parses its stored text only when a checkpoint or a reader needs the state.
    """

    def __init__(self, max_checkpoints: int = 50) -> None:
        self.max = max_checkpoints
        self.marks: list[_Mark] = []
        self.first = 0
        """The index of the oldest checkpoint kept."""
        self._anchor: str | None = None
        """The state text the newest mark's patch is relative to (None: not known yet)."""
        self._source: str | None = None
        """For a loaded session: the stored snapshot text holding the anchor's state."""
        self._base: dict[str, Any] | None = None
        """The anchor's state, once parsed."""
        self._newest: dict[str, Any] | None = None
        """The newest checkpoint's state, once computed."""

    # -- persisted form ----------------------------------------------------------------
    def data(self) -> dict[str, Any] | None:
        """The stored form (None: no checkpoint yet; history switched off is kept as such)."""
        if self.max == 0:
            return {"marks": [], "max": 0}
        if not self.marks:
            return None
        out: dict[str, Any] = {"marks": [m.data() for m in self.marks]}
        if self.first:
            out["first"] = self.first
        if self.max != 50:
            out["max"] = self.max
        return out

    def text(self) -> str | None:
        """:meth:`data` as canonical JSON text, from each mark's cached text."""
        if self.max == 0:
            return '{"marks":[],"max":0}'
        if not self.marks:
            return None
        first = f'"first":{self.first},' if self.first else ""
        most = f',"max":{self.max}' if self.max != 50 else ""
        return "{" + first + '"marks":[' + ",".join(m.text() for m in self.marks) + "]" + most + "}"

    @classmethod
    def from_data(
        cls, data: dict[str, Any] | None, anchor: str | None, source: str | None = None
    ) -> History:
        """Rebuild from :meth:`data`. The newest patch is relative to the state the session
        was stored with: given as its text (``anchor``), or as the stored snapshot text it
        is part of (``source``, parsed only when needed)."""
        history = cls(int((data or {}).get("max", 50)))
        if data:
            history.first = int(data.get("first", 0))
            history.marks = [
                _Mark(m["at"], m["n"], m["seq"], m.get("back", {})) for m in data["marks"]
            ]
            history._anchor = anchor
            history._source = source if anchor is None else None
        return history

    # -- the state behind the patches ----------------------------------------------------
    def _base_state(self) -> dict[str, Any]:
        if self._base is None:
            if self._anchor is not None:
                self._base = json.loads(self._anchor)
            elif self._source is not None:
                from .snapshot import canonical  # (the writer's rules; it imports this)

                # as stored: defaults left out, as core_values leaves them out — a source
                # written by model_dump_json() spells them out, and they are no change
                self._base = canonical(_core_of(json.loads(self._source)))
            else:  # (no checkpoint was taken or loaded)
                self._base = {}
        return self._base

    def _anchor_text(self) -> str:
        if self._anchor is None:
            self._anchor = canonical_dumps(self._base_state())
            self._source = None
        return self._anchor

    def newest_state(self) -> dict[str, Any] | None:
        """The state at the newest checkpoint."""
        if not self.marks:
            return None
        if self._newest is None:
            self._newest = apply_patch(self._base_state(), self.marks[-1].back)
        return self._newest

    # -- taking checkpoints ------------------------------------------------------------
    def record(self, session: Any, at: float) -> None:
        """Take a checkpoint of ``session`` as it is now (none with ``max`` 0)."""
        if self.max == 0:
            return
        values = core_values(session)
        text = canonical_dumps(values)
        state: dict[str, Any] | None = None
        if self.marks:
            prev = self.marks[-1]
            if prev.back or self._anchor is None or text != self._anchor:
                newest = self.newest_state()
                # the patch takes its values from ``newest`` only: the session's own
                # objects in ``values`` are compared, never kept
                prev.back = diff(values, newest) or {}
            else:
                state = self._newest  # nothing changed since: the same state
        log = session.events
        self.marks.append(_Mark(at, len(log), log.next_seq, {}))
        self._anchor, self._source = text, None
        self._base = self._newest = state
        if len(self.marks) > self.max:  # backward patches: the oldest simply goes
            del self.marks[0]
            self.first += 1

    def settle(self, session: Any, text: str | None = None) -> None:
        """Before a save: make the newest patch relative to the state being saved (the
        session may have changed since its last checkpoint, say by a decision). ``text``:
        the state's :func:`core_text`, when the caller has it."""
        if not self.marks or self.max == 0:
            return
        now = core_text(session) if text is None else text
        if now == self._anchor_text():
            return
        newest = self.newest_state()
        if newest is not None:
            self.marks[-1].back = diff(json.loads(now), newest) or {}
        self._anchor, self._source, self._base = now, None, None

    # -- reading -----------------------------------------------------------------------
    def states(self, oldest: int = 0) -> list[dict[str, Any]]:
        """The state at every checkpoint kept from position ``oldest`` on, oldest first
        (walking the patches back from the newest)."""
        if not self.marks:
            return []
        try:
            newest = self.newest_state()
            assert newest is not None
            out = [newest]
            for mark in reversed(self.marks[oldest:-1]):
                out.append(apply_patch(out[-1], mark.back))
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            # well-formed patches that do not fit the states they are applied to: only
            # a snapshot edited by hand gets here
            raise SnapshotSchemaError(
                f"its checkpoints do not apply: {exc}", path="history"
            ) from None
        out.reverse()
        return out

    def state_at(self, position: int) -> dict[str, Any]:
        """The state at the checkpoint ``position`` places from the oldest kept."""
        return self.states(position)[0]

    def checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint kept, oldest first."""
        return [
            Checkpoint(
                index=self.first + i,
                at=mark.at,
                status=state.get("status", "new"),
                positions=positions(state),
                pending_reason=state.get("pending_reason") if state.get("pending") else None,
                events=mark.events,
            )
            for i, (mark, state) in enumerate(zip(self.marks, self.states(), strict=True))
        ]


def take_checkpoint(session: Any, *, failing: bool = False, since: int | None = None) -> None:
    """Record a request end (or a node) in ``session``'s history, if it keeps one (R43).
    ``failing``: the request is ending with an error, which a failure here must not hide.
    ``since``: the log's next sequence number when the request began — a request that
    logged nothing (refused before it started) changed nothing and takes no checkpoint."""
    record = getattr(session, "record_checkpoint", None)
    if record is None:
        return
    if since is not None and getattr(session.events, "next_seq", None) == since:
        return
    try:
        record()
    except Exception:
        if not failing:
            raise  # (a value no store can keep, changed in place: typed, like a save)


def positions(state: dict[str, Any]) -> list[str]:
    """Where a state stands: its root graph's branches, else its agents' routes."""
    flow = state.get("flow") or {}
    root = flow.get("root")
    graphs = flow.get("graphs", {})
    if root is not None and root in graphs:
        return list(graphs[root].get("tokens", []))
    agent = state.get("agent")
    trace = state.get("traces", {}).get(agent) if agent else None
    return [trace["route"]] if isinstance(trace, dict) and "route" in trace else []
