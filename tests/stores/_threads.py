"""Many paused threads, quickly: one ``pair`` session (two open approvals) paused by its agent,
then stored again under other ids through ``put_snapshot`` (each with a ledger family of its
own), as a restore of that snapshot would."""

from __future__ import annotations

import os
from typing import Any

from tests._helpers import IN_CI

from intermission import HITL, HITLDecision, InMemoryAgentSession
from intermission.core.ledger import new_family

THREADS = int(os.environ.get("INTERMISSION_PAGING_THREADS", "1000" if IN_CI else "3000"))
"""How many threads the paging tests keep open (more: INTERMISSION_PAGING_THREADS)."""

_PROTO = "proto-0000"


def _prototype() -> tuple[str, str]:
    from tests.agui.agents import pair

    s = InMemoryAgentSession(_PROTO)
    pair().prompt("go").session(s).call()
    assert s.is_pending and len(HITL.pending_tasks(s)) == 2
    assert s.family is not None
    return s.to_json(), s.family


def paused_pairs(store: Any, ids: list[str]) -> None:
    """Store a paused ``pair`` thread (two open interrupts) under each of ``ids``."""
    text, family = _prototype()
    for sid in ids:
        store.put_snapshot(text.replace(f'"{_PROTO}"', f'"{sid}"').replace(family, new_family()))


def decide_one(store: Any, sid: str) -> None:
    """Decide one of a thread's two approvals and save: the thread stays open (the other
    is undecided); a thread decided once before is only saved again."""
    s = store.load(sid)
    open_tasks = [t for t in HITL.pending_tasks(s) if t.call_uuid not in s.hitl.decisions]
    if len(open_tasks) == 2:
        HITL.submit(s, open_tasks[0], HITLDecision.approve().reviewer("pager"))
    else:
        s.context.put("touched", (s.context.get("touched") or 0) + 1)
    store.save(s)
    assert store.load(sid).is_pending
