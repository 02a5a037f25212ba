"""Sessions as Temporal workflows (extra ``temporal``, SPEC R66).

The same agents and graphs, the same approvals and policies, on the engine many teams
already run: the session is a workflow (its store, see :mod:`.workflow`), the agent runs
between pauses in an activity, a pause waits in the workflow at no compute with its deadline
as a durable timer, and each decision is an Update whose validator applies the agent's
``ApprovalPolicy`` before anything enters history.

- :func:`worker` — a temporalio Worker serving your agents (``python -m intermission
  worker --store temporal://HOST:PORT/NAMESPACE --agents module:AGENTS``).
- :class:`TemporalRunner` — start sessions as workflows from async code.
- :class:`~.store.TemporalStore` — ``open_store("temporal://HOST:PORT/NAMESPACE")``: the
  store calls (``pending``, ``load``, ``audit``, ``decide``) the CLI and surfaces use.

Decisions are signed with ``$INTERMISSION_TEMPORAL_KEY``, shared by the surfaces and the
workers (see :mod:`.wire`). Nothing else in intermission imports this package.
"""

from __future__ import annotations

from typing import Any

from ..errors import MissingDependencyError

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise MissingDependencyError("temporalio", "temporal") from exc

from ..agents.table import AgentTable
from ..principals import Actor
from . import registry
from .activities import advance
from .store import DEFAULT_TASK_QUEUE, TemporalStore, connect, workflow_id
from .wire import KEY_ENV, Decided, Start, resolve_key, signed_start
from .workflow import SEARCH_ATTRIBUTES, SessionWorkflow

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "KEY_ENV",
    "Decided",
    "SessionWorkflow",
    "TemporalRunner",
    "TemporalStore",
    "connect",
    "register_search_attributes",
    "worker",
    "workflow_id",
]


def _pydantic_client(client: Any) -> Any:
    """``client`` with the pydantic data converter (the workflows' payloads are models)."""
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    if client.data_converter is pydantic_data_converter:
        return client
    config = client.config()
    config["data_converter"] = pydantic_data_converter
    return Client(**config)


async def register_search_attributes(client: Any) -> list[str]:
    """Add the search attributes the workflows set to ``client``'s namespace, where they
    are missing; returns the names added (none on a namespace that has them)."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )
    from temporalio.service import RPCError

    kinds = {
        "BOOL": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
        "KEYWORD": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    }
    have = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = {
        k.name: kinds[k.indexed_value_type.name]
        for k in SEARCH_ATTRIBUTES
        if k.name not in have.custom_attributes
    }
    if missing:
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
            )
        except RPCError as exc:  # another worker added them meanwhile
            if "already" not in str(exc).lower():
                raise
    return sorted(missing)


async def worker(
    client: Any,
    *,
    agents: Any,
    task_queue: str = DEFAULT_TASK_QUEUE,
    key: str | None = None,
    **options: Any,
) -> Any:
    """A temporalio ``Worker`` that runs sessions of ``agents`` (an AgentTable or a mapping
    of names to agents) on ``task_queue``; registers the search attributes first. Run it
    with ``await w.run()`` (or ``async with w:``). ``options`` go to ``Worker``."""
    from temporalio.worker import Worker

    from ..stores.audit_chain import resolve_key as audit_key_of

    table = agents if isinstance(agents, AgentTable) else AgentTable(agents)
    for name in table.names():  # built now: never by a factory inside workflow code
        table.agents(name)
    registry.serve(task_queue, table, resolve_key(key), audit_key_of(None))
    client = _pydantic_client(client)
    await register_search_attributes(client)
    return Worker(client, task_queue=task_queue, workflows=[SessionWorkflow],
                  activities=[advance], **options)  # fmt: skip


class TemporalRunner:
    """Start sessions of ``agents`` as workflows on ``task_queue`` (SPEC R66)."""

    def __init__(
        self,
        client: Any,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        agents: Any,
        key: str | None = None,
    ) -> None:
        self._key = resolve_key(key)
        self.client = _pydantic_client(client)
        self.task_queue = task_queue
        self.agents = agents if isinstance(agents, AgentTable) else AgentTable(agents)

    async def worker(self, **options: Any) -> Any:
        """A worker for this runner's agents (see :func:`worker`)."""
        return await worker(self.client, agents=self.agents, task_queue=self.task_queue,
                            key=self._key.decode(), **options)  # fmt: skip

    async def start(
        self, agent: str, prompt: str, *, session_id: str, principal: Actor | None = None
    ) -> Any:
        """Start ``agent`` on a new session ``session_id``; the workflow's handle."""
        self.agents.newest(agent)  # (an unknown agent is refused here, not on the worker)
        from temporalio.common import WorkflowIDReusePolicy

        start = signed_start(Start(session_id=session_id, agent=agent, prompt=prompt,
                                   requester=principal), self._key)  # fmt: skip
        return await self.client.start_workflow(
            "intermission.session", start, id=workflow_id(session_id),
            task_queue=self.task_queue, result_type=Decided,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )  # fmt: skip
