"""The floor of a decision over AG-UI: one HTTP request that does one PostgreSQL commit, on
the same stack the AG-UI server runs (uvicorn, Starlette, psycopg in a worker thread) and
answered as a one-event SSE stream, so the client reads it the way it reads a decision.

Run by ``agui_latency.py``: ``python bench/_floor_server.py PORT`` with the DSN in
``INTERMISSION_BENCH_PG_DSN`` (never argv: it may hold a password)."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

DSN = os.environ["INTERMISSION_BENCH_PG_DSN"]
_local = threading.local()


def _connection() -> Any:
    import psycopg  # (an optional dependency: imported where used, as the package does)

    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = psycopg.connect(DSN)
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS bench_floor (k text, v text)")
        conn.commit()
    return conn


def _commit(key: str) -> None:
    conn = _connection()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO bench_floor (k, v) VALUES (%s, %s)", (key, "applied"))
    conn.commit()


async def commit(request: Request) -> Response:
    body = await request.json()
    await run_in_threadpool(_commit, str(body.get("threadId")))
    frame = 'data: {"type":"RUN_FINISHED","outcome":{"type":"success"}}\n\n'
    return Response(frame, media_type="text/event-stream")


app = Starlette(routes=[Route("/commit", commit, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
