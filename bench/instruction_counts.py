"""Pause and claimed-resume cost by instruction counts (callgrind), for a loaded machine.

Seconds move with load; instructions do not. Run the same process three ways under
``valgrind --tool=callgrind`` and subtract: ``none`` (imports and set-up only), ``pause``
(N pauses of the approval graph on SQLite) and ``both`` (N pauses, then N claimed resumes):

    for mode in none pause both; do
      valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$mode \\
        python bench/instruction_counts.py $mode
    done

pause = pause − none; resume = both − pause. Compare against another commit in the same venv.
"""

from __future__ import annotations

import sys
import tempfile

from intermission import InMemoryAgentSession, decide_graph
from intermission.examples import build_change_graph
from intermission.stores.sqlite import SQLiteStore

N = 100


def main(mode: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(f"{tmp}/bench.sqlite")
        team = build_change_graph(lambda change_id: f"applied {change_id}")
        # one warm-up pause and resume outside the counted loop (first-use caches)
        warm = InMemoryAgentSession.of("warm")
        team.prompt("Upgrade").session(warm).call()
        if mode == "none":
            return
        for i in range(N):
            s = InMemoryAgentSession.of(f"s-{i}")
            team.prompt("Upgrade").session(s).call()
            store.save(s)
        if mode == "pause":
            return
        for i in range(N):
            with store.resume(f"s-{i}") as s:
                decide_graph(s, "APPROVE")
                team.prompt().session(s).call()
        store.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "both")
