"""``python -m intermission worker``: serve your agents as Temporal workflows (SPEC R66),
and the CLI's decisions on a ``temporal://`` store."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .errors import UsageError
from .principals import Actor

__all__ = ["add_worker_parser", "cmd_worker", "decide_on_temporal", "on_temporal"]


def on_temporal(store: Any) -> bool:
    """True for a store whose sessions run as Temporal workflows (they decide themselves)."""
    return bool(getattr(store, "decides_itself", False))


def add_worker_parser(add: Any) -> None:
    """The ``worker`` command's parser."""
    w = add("worker", "run a Temporal worker for your agents (--store temporal://HOST:PORT/NS)",
            runs_agents=True)  # fmt: skip
    w.add_argument("--task-queue", default=None,
                   help="the task queue to poll (default: the URL's ?task_queue=, else "
                   "intermission)")  # fmt: skip


def cmd_worker(args: argparse.Namespace, store: Any, table: Any) -> int:
    """Run a worker until ^C or SIGTERM."""
    if not on_temporal(store):
        raise UsageError("worker runs sessions on Temporal: give --store temporal://HOST:PORT/NS")
    from .temporal import worker

    queue = args.task_queue or store.task_queue

    async def serve() -> None:
        w = await worker(store.client, agents=table, task_queue=queue)
        print(f"worker on {store.target} queue {queue!r}: serving "
              f"{', '.join(table.names())}", flush=True)  # fmt: skip
        await w.run()

    done = store.run_forever(serve())
    try:
        done.result()
    except KeyboardInterrupt:
        done.cancel()
        return 130
    return 0


def decide_on_temporal(args: argparse.Namespace, store: Any, approve: bool, me: Actor) -> None:
    """Approve / reject on a Temporal store: one signed Update, judged by the workflow."""
    out = store.decide(
        args.session_id, "approve" if approve else "reject", principal=me,
        reason=getattr(args, "reason", None), comment=args.comment, calls=args.call,
    )  # fmt: skip
    if out.waiting is not None:
        print(f"recorded; {out.waiting}")
    else:
        print(f"applied; session {args.session_id} is {out.status}")
    sys.stdout.flush()
