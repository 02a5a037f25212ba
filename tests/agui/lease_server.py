"""``serve`` on a store whose claims lapse fast and are never renewed, as for a stalled
server: ``python -m tests.agui.lease_server STORE PORT``."""

from __future__ import annotations

import sys

from intermission.agui import agui_app, serve
from intermission.stores.open import open_store

from .agents import AGENTS

LEASE_MS = 300.0


def main() -> None:
    target, port = sys.argv[1], int(sys.argv[2])
    store = open_store(target, lease_ms=LEASE_MS, heartbeat=False)
    try:
        serve(agui_app(AGENTS, store), port=port)
    finally:
        store.close()


if __name__ == "__main__":
    main()
