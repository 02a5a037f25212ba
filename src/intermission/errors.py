"""The one error tree of intermission.

Every error the package raises on purpose is an :class:`IntermissionError`. Some also
inherit a builtin so existing ``except ValueError`` code keeps working::

    IntermissionError
    ├── MissingDependencyError (ImportError)     an optional extra is not installed
    ├── GraphDefinitionError (ValueError)        a graph spec is invalid (names the node)
    ├── FlowRuntimeError                         a graph could not advance (no route, task failed)
    ├── SessionStateError                        the session cannot do what was asked
    │   ├── NothingToResumeError                 empty prompt() but nothing is left to resume
    │   ├── RequestInProgressError               a request is already running on this session
    │   ├── EffectOutcomeUnknownError            a ledgered effect started but never finished
    │   ├── AgentMismatchError                   the session was made by another agent
    │   │   └── AgentVersionError                its paused version is not served (R62)
    │   ├── AgentMigrationError                  a version migration raised: nothing changed
    │   ├── NothingToResolveError                the effect is not of unknown outcome
    │   └── EffectNotReopenableError             forget: its approval is no longer held open
    ├── SnapshotError (ValueError)               a snapshot cannot be written or read
    │   ├── NotSerializableError                 a context value is not JSON (names the key)
    │   ├── SnapshotSchemaError                  wrong schema version, unknown field, wrong type
    │   └── SnapshotTooLargeError                larger than a snapshot may be (names the limit)
    ├── ModelError                               a chat model failed or was misused
    │   ├── ModelCallError                       a model call failed (HTTP status, attempts)
    │   └── ScriptExhaustedError                 a ScriptedModel has no reply for this turn
    ├── ToolDefinitionError (TypeError)          a function cannot become a tool
    ├── UsageError (TypeError, ValueError)       an API got the wrong kind of object or order
    │   └── PrincipalNameError                   a name hides characters or mixes scripts
    ├── InvalidDecisionError (ValueError)        an HITL or graph decision was refused
    │   ├── UnknownTaskError (KeyError)          no pending task with that call UUID
    │   ├── AmbiguousTaskError                   several pending calls share a tool name
    │   ├── DecisionRefusedError                 the approval's policy refused it (names the rule)
    │   │   └── ReviewerNotAllowedError (PermissionError)  not one who may decide this
    │   ├── DecisionConflictError                another decision is already recorded (R39)
    │   └── DeadlinePassedError                  the task's or approval's deadline has passed
    ├── StoreError                               a session store failed
    │   ├── SessionNotFoundError (KeyError)      no stored session with that id
    │   ├── ConflictError                        stale save (compare-and-set on the version)
    │   ├── SessionBusyError                     another resumer holds the claim
    │   ├── LeaseLostError                       this resumer's claim lapsed and was taken (R40)
    │   ├── StoreUnavailableError                the database could not be reached (R40)
    │   ├── StoreSchemaError                     the store was written by a newer release
    │   ├── StoreMigrationError                  upgrading an older store's tables failed
    │   └── StoreClosedError                     the store was closed: open a new one (R51)
    ├── ToolUnavailableError                     a tool's server could not be reached (R46)
    ├── RunCancelledError                        a run was cancelled before it finished
    ├── ServeError (OSError)                     the AG-UI server cannot listen where asked
    └── NotifyError                              telling reviewers failed or is set up wrong
        ├── NotifyConfigError (ValueError)       a notification config or target is wrong
        ├── NotificationNotFoundError (KeyError) no notification with that key in the outbox
        └── DeliveryError                        a target did not take a notification (retried)
            ├── DeliveryRefusedError             the receiver answered with an error status
            └── DeliveryUnreachableError         the receiver could not be reached

Pausing is control flow, not an error: ``session.pending(True, reason)`` never raises, and
nothing in this tree is used to unwind a pause.
"""

from __future__ import annotations

# (defined apart to keep this module small; every class here and there is
# ``intermission.errors.X`` to users, in tracebacks and to pickle)
from ._error_base import IntermissionError
from ._notify_errors import (
    DeliveryError,
    DeliveryRefusedError,
    DeliveryUnreachableError,
    NotificationNotFoundError,
    NotifyConfigError,
    NotifyError,
)
from ._session_errors import (
    AgentMigrationError,
    AgentMismatchError,
    AgentVersionError,
    EffectNotReopenableError,
    EffectOutcomeUnknownError,
    NothingToResolveError,
    NothingToResumeError,
    RequestInProgressError,
    SessionStateError,
)
from ._store_errors import (
    ConflictError,
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    StoreClosedError,
    StoreError,
    StoreMigrationError,
    StoreSchemaError,
    StoreUnavailableError,
)

__all__ = [
    "AgentMigrationError",
    "AgentMismatchError",
    "AgentVersionError",
    "AmbiguousTaskError",
    "ConflictError",
    "DeadlinePassedError",
    "DecisionConflictError",
    "DecisionRefusedError",
    "DeliveryError",
    "DeliveryRefusedError",
    "DeliveryUnreachableError",
    "EffectNotReopenableError",
    "EffectOutcomeUnknownError",
    "FlowRuntimeError",
    "GraphDefinitionError",
    "IntermissionError",
    "InvalidDecisionError",
    "LeaseLostError",
    "MissingDependencyError",
    "ModelCallError",
    "ModelError",
    "NotSerializableError",
    "NotificationNotFoundError",
    "NothingToResolveError",
    "NothingToResumeError",
    "NotifyConfigError",
    "NotifyError",
    "PrincipalNameError",
    "RequestInProgressError",
    "ReviewerNotAllowedError",
    "RunCancelledError",
    "ScriptExhaustedError",
    "ServeError",
    "SessionBusyError",
    "SessionNotFoundError",
    "SessionStateError",
    "SnapshotError",
    "SnapshotSchemaError",
    "SnapshotTooLargeError",
    "StoreClosedError",
    "StoreError",
    "StoreMigrationError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "ToolDefinitionError",
    "ToolUnavailableError",
    "UnknownTaskError",
    "UsageError",
]


class MissingDependencyError(IntermissionError, ImportError):
    """An optional dependency is missing; the message says which extra to install."""

    def __init__(self, module: str, extra: str, hint: str = "") -> None:
        self.module = module
        self.extra = extra
        msg = f"{module!r} is not installed: pip install 'intermission[{extra}]'"
        super().__init__(msg + (f" ({hint})" if hint else ""))


class GraphDefinitionError(IntermissionError, ValueError):
    """A graph spec is invalid. ``node_id`` names the offending node (or None)."""

    def __init__(self, message: str, *, graph_id: str | None = None, node_id: str | None = None):
        self.graph_id = graph_id
        self.node_id = node_id
        where = f"graph {graph_id!r}" if graph_id else "graph"
        if node_id is not None:
            where += f", node {node_id!r}"
        super().__init__(f"{where}: {message}")


class FlowRuntimeError(IntermissionError):
    """A graph could not advance: no route out of a gateway, or a task raised."""

    def __init__(self, message: str, *, graph_id: str | None = None, node_id: str | None = None):
        self.graph_id = graph_id
        self.node_id = node_id
        super().__init__(message)


class SnapshotError(IntermissionError, ValueError):
    """A snapshot could not be written or read."""


class NotSerializableError(SnapshotError):
    """A context value is not JSON-serialisable; ``key`` names it (R28)."""

    def __init__(self, key: str, value: object, why: str | None = None) -> None:
        self.key = key
        if why is not None:
            super().__init__(f"{key!r}: {why}")
            return
        what = (
            "a float that is not finite"
            if isinstance(value, float)
            else f"a {type(value).__name__}"
        )
        super().__init__(
            f"{key!r} holds {what}, which is not JSON: store plain data (str, int, finite "
            "float, bool, None, lists and dicts of them); keep live objects in ctx.attrs, "
            "which is never saved"
        )


class SnapshotSchemaError(SnapshotError):
    """A snapshot has the wrong schema version, an unknown field or a wrong type."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class SnapshotTooLargeError(SnapshotError):
    """A snapshot is larger than ``limit`` (``limits.MAX_SNAPSHOT_TEXT``) characters of JSON.

    Every store refuses to save it and every loader to read it (R50), so what a store keeps
    always passes through its own snapshot."""

    def __init__(self, size: int, limit: int, session_id: str | None = None) -> None:
        self.size = size
        self.limit = limit
        self.session_id = session_id
        whose = f"session {session_id!r}: " if session_id else ""
        super().__init__(
            f"{whose}the snapshot is {size:,} characters of JSON, more than the {limit:,} a "
            "snapshot may hold (intermission.limits.MAX_SNAPSHOT_TEXT); keep large tool "
            "outputs outside the session (a file or blob store) and put a reference in it"
        )


class ModelError(IntermissionError):
    """A chat model failed or was misused."""


class ModelCallError(ModelError):
    """A model call failed: an error status, an unreachable server, a timeout or no reply.

    ``status``: the HTTP status (None when there was none); ``retryable``: a transient
    failure (a connection error, a timeout, an empty reply, HTTP 429 or 5xx) that a ReAct
    agent retries; ``attempts``: how many calls were made before giving up (set by the agent
    on its final failure)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        self.status = status
        self.retryable = retryable
        self.attempts = 1
        super().__init__(message)


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was asked for a reply past the end of its script."""

    def __init__(self, turn: int, length: int) -> None:
        self.turn = turn
        super().__init__(
            f"ScriptedModel has no reply for turn {turn}: the script has {length} "
            "replies; add more replies or use a function script"
        )


class ToolDefinitionError(IntermissionError, TypeError):
    """A Python function cannot be turned into a tool."""


class UsageError(IntermissionError, TypeError, ValueError):
    """An API was given the wrong kind of object, or its calls came in the wrong order.

    Say ``approvers()`` came before any ``on_tool()``. Both builtins are bases so that
    ``except TypeError`` and ``except ValueError`` code keeps working."""


class PrincipalNameError(UsageError):
    """A principal's name was refused: it has hidden characters or mixes scripts.

    It holds control, format (zero-width), bidi or invisible characters, or mixes scripts (a
    Cyrillic ``а`` in a Latin name), so two people could look like one, or one like two."""


class InvalidDecisionError(IntermissionError, ValueError):
    """A decision was refused; the session is unchanged."""

    def __init__(self, message: str, *, call_uuid: str | None = None) -> None:
        self.call_uuid = call_uuid
        super().__init__(message)


class UnknownTaskError(InvalidDecisionError, KeyError):
    """No pending task has that call UUID."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class AmbiguousTaskError(InvalidDecisionError):
    """Several pending calls share a tool name; look tasks up by call UUID."""


class DecisionRefusedError(InvalidDecisionError):
    """The approval's policy refused this decision; the session is unchanged.

    ``rule`` names the rule: ``roles`` (the decider holds none of the roles that may
    decide), ``approvers`` (not one of the named approvers), ``not_requester`` (the
    decider asked for it), ``twice`` (the decider's approval already counts),
    ``reason_to_reject`` (a rejection without a reason), ``same_arguments`` (an approval
    of other arguments than the approvals so far). ``reviewer``: who tried; ``verdict``:
    what they tried; ``session_id`` and ``call_uuid`` (None for a graph approval): on what.
    """

    def __init__(
        self,
        message: str,
        *,
        rule: str = "policy",
        reviewer: str | None = None,
        verdict: str | None = None,
        session_id: str | None = None,
        call_uuid: str | None = None,
    ) -> None:
        self.rule = rule
        self.reviewer = reviewer
        self.verdict = verdict
        self.session_id = session_id
        super().__init__(message, call_uuid=call_uuid)


class ReviewerNotAllowedError(DecisionRefusedError, PermissionError):
    """The decider may not decide this approval.

    The decider is not in the policy's roles or the named approvers, or is the one who
    asked for it."""


class DecisionConflictError(InvalidDecisionError):
    """A different decision is already recorded for this approval and not yet applied.

    The first decision wins (R39). ``verdict``, ``reviewer`` and ``time_ms`` say who decided
    what and when; ``applied``: another resume applied it already. The session is
    unchanged."""

    def __init__(
        self,
        session_id: str,
        what: str,
        verdict: str,
        reviewer: str | None,
        time_ms: float | None,
        *,
        call_uuid: str | None = None,
        applied: bool = False,
    ) -> None:
        self.session_id = session_id
        self.applied = applied
        self.verdict = verdict
        self.reviewer = reviewer
        self.time_ms = time_ms
        when = ""
        if time_ms is not None:
            import datetime as _dt

            stamp = _dt.datetime.fromtimestamp(time_ms / 1000, _dt.timezone.utc)
            when = f" at {stamp.strftime('%Y-%m-%d %H:%M:%S')} UTC"
        who = reviewer if reviewer else "an unnamed reviewer"
        super().__init__(
            f"{what} of session {session_id!r} was already decided: {verdict} by {who}{when}; "
            + (
                "another resume applied it meanwhile, nothing was changed here"
                if applied
                else "the first decision stands and nothing was changed (decide on a fork, "
                "or wait for the resume that applies it)"
            ),
            call_uuid=call_uuid,
        )


def _utc(time_ms: float) -> str:
    import datetime as _dt

    stamp = _dt.datetime.fromtimestamp(time_ms / 1000, _dt.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S") + f".{int(time_ms % 1000):03d} UTC"


class DeadlinePassedError(InvalidDecisionError):
    """A decision came after its deadline and was refused; the session is unchanged.

    ``session_id``, ``call_uuid`` (a tool task) or ``approval`` (the context key of a graph
    approval), ``deadline_ms`` and ``now_ms`` (epoch milliseconds of the session's clock)
    say which deadline and when the decision came. The task stays visible as expired
    until the next resume rejects it (reviewer ``system:deadline``)."""

    def __init__(
        self,
        session_id: str,
        deadline_ms: float,
        now_ms: float,
        *,
        call_uuid: str | None = None,
        approval: str | None = None,
        what: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.approval = approval
        self.deadline_ms = deadline_ms
        self.now_ms = now_ms
        late = max(0.0, now_ms - deadline_ms)
        lateness = f"{late:.0f} ms" if late < 10_000 else f"{late / 1000:.0f} s"
        subject = what or (f"tool call {call_uuid}" if call_uuid else "the approval")
        super().__init__(
            f"{subject} of session {session_id!r} had to be decided by {_utc(deadline_ms)}; "
            f"this decision came {lateness} late and was refused, nothing was changed "
            "(the next resume rejects it as system:deadline)",
            call_uuid=call_uuid,
        )


class ToolUnavailableError(IntermissionError):
    """A tool's server (an MCP server) could not be reached, or dropped the connection in a call.

    The run stops here and the session stays resumable: resume it when the server is back.
    ``sent``: the call had reached the server before the connection dropped, so whether it
    ran is unknown — its ledger entry stays ``started`` and the next attempt raises
    EffectOutcomeUnknownError until a human resolves it."""

    def __init__(self, message: str, *, tool: str = "", sent: bool = False) -> None:
        self.tool = tool
        self.sent = sent
        super().__init__(message)


class RunCancelledError(IntermissionError):
    """A run was cancelled before it finished; the session stays resumable."""


class ServeError(IntermissionError, OSError):
    """The AG-UI server cannot listen on ``host``:``port``.

    The port is in use, the address is not this machine's, or the port needs privileges.
    Nothing was started."""

    def __init__(self, host: str, port: int, why: str) -> None:
        self.host = host
        self.port = port
        super().__init__(
            f"cannot serve on {host}:{port}: {why}; pick another port (or stop what listens there)"
        )
