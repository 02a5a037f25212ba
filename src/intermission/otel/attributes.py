"""The names intermission's spans, events and links carry (no OpenTelemetry import here).

``gen_ai.*`` names are the OpenTelemetry GenAI conventions' (all of which are still in
Development there); ``intermission.*`` names are ours. The names in :data:`PROVISIONAL`
come from an open proposal for agents that pause and resume (lifecycle events
``gen_ai.agent.paused`` / ``.resumed`` / ``.checkpointed``) and are emitted only when
asked for (``instrument(experimental=True)`` or
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``): they may change or go.
"""

from __future__ import annotations

__all__ = ["CONTENT", "PROVISIONAL"]

# -- GenAI conventions --------------------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
WORKFLOW_NAME = "gen_ai.workflow.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"

# opt-in content (``capture_content=True``), as the conventions say
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
EDITED_ARGUMENTS = "intermission.decision.edited_arguments"
CONTENT = frozenset(
    {INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, TOOL_ARGUMENTS, TOOL_RESULT,
     EDITED_ARGUMENTS}
)  # fmt: skip
"""Attributes that carry what people and models wrote: only with ``capture_content``."""

# -- intermission's own -------------------------------------------------------------------
RUN_ID = "intermission.run.id"
REQUEST_KIND = "intermission.request.kind"
"""``prompt`` (a new task), ``resume`` (continues a paused session), ``continue`` (a graph
evaluated again on its context)."""
CANCELLED = "intermission.request.cancelled"
ABNORMAL = "intermission.request.abnormal"
STATUS = "intermission.session.status"
SAVED = "intermission.session.saved"
"""False on a paused request's root when the store never kept what it ran to: its save
lost compare-and-set (a stale copy; the store keeps another) or never happened. Such a
pause is not on record, so the root carries no pause event."""
EFFECT_ID = "intermission.effect.id"
EXECUTED = "intermission.tool.executed"
"""False when the call did not run here: a person rejected or skipped it, a preview
(dry run) left it out, it was refused (unknown tool, invalid arguments), or its recorded
result was returned from the ledger."""
REPLAYED = "intermission.effect.replayed"
DRY_RUN = "intermission.tool.dry_run"
NODE_ID = "intermission.node.id"
NODE_KIND = "intermission.node.kind"
GRAPH_ID = "intermission.graph.id"
NODE_COMPLETED = "intermission.node.completed"
TURN = "intermission.turn"
PAUSE_ID = "intermission.pause.id"
PAUSE_REASON = "intermission.pause.reason"
PAUSE_INTERRUPTS = "intermission.pause.interrupts"
PAUSE_TOOLS = "intermission.pause.tools"
PAUSE_WAIT = "intermission.pause.duration_ms"
"""On a resume: how long the session waited between the paused request's end and this
request's start (the human's time), by the session's clock."""
LINK_TYPE = "intermission.link.type"
"""On a link: ``resume`` (the paused request this one continues) or ``fork`` (the last
request of the session this fork was made from)."""
LINKED_TRACE = "intermission.link.trace_id"
LINKED_SPAN = "intermission.link.span_id"
"""On a resumed or forked request's root: the linked span again, as attributes (hex), for
backends that keep no links (Arize Phoenix drops them) and for search."""
FORK_PARENT = "intermission.fork.parent"
FORK_CHECKPOINT = "intermission.fork.checkpoint"
VERDICT = "intermission.decision.verdict"
EDITED = "intermission.decision.edited"
REVIEWER = "intermission.decision.principal"
VIA = "intermission.decision.via"
ROLES = "intermission.decision.roles"
AUTHENTICATED = "intermission.decision.authenticated"
REASON = "intermission.decision.reason"
TARGET = "intermission.decision.target"
TIMED_OUT = "intermission.decision.timed_out"
POLICY = "intermission.decision.policy"
"""Where the approval policy stood: votes so far and what it still needs, as text."""
VOTES = "intermission.decision.votes"
RULE = "intermission.decision.rule"
REFUSED_BY = "intermission.decision.error"
RESOLUTION = "intermission.task.resolution"
ACTION = "intermission.audit.action"
AGUI_RUN = "intermission.agui.run_id"

# event names
PAUSE_EVENT = "intermission.pause"
DECISION_APPLIED = "intermission.decision.applied"
DECISION_RECORDED = "intermission.decision.recorded"
HITL_PENDING = "intermission.hitl.pending"
TASK_EXPIRED = "intermission.task.expired"
EFFECT_REPLAYED = "intermission.effect.replayed"
EFFECT_RAN = "intermission.effect.ran"

# -- provisional: the open proposal for agents that pause (behind the opt-in) -------------
PAUSED = "gen_ai.agent.paused"
RESUMED = "gen_ai.agent.resumed"
CHECKPOINTED = "gen_ai.agent.checkpointed"
EXECUTION_ID = "gen_ai.agent.execution.id"
GEN_PAUSE_ID = "gen_ai.agent.pause.id"
GEN_PAUSE_REASON = "gen_ai.agent.pause.reason"
CHECKPOINT_ID = "gen_ai.agent.checkpoint.id"
RESUMED_FROM_TYPE = "gen_ai.agent.resumed_from.type"
RESUMED_FROM_ID = "gen_ai.agent.resumed_from.id"
PROVISIONAL = frozenset(
    {PAUSED, RESUMED, CHECKPOINTED, EXECUTION_ID, GEN_PAUSE_ID, GEN_PAUSE_REASON,
     CHECKPOINT_ID, RESUMED_FROM_TYPE, RESUMED_FROM_ID}
)  # fmt: skip
"""Event and attribute names of the open pause/resume proposal: emitted only on opt-in."""
