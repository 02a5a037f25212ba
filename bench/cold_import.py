"""4. Cold import: a fresh interpreter per sample, wall time minus a bare one."""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import time

from _shared import (
    row,
    verdict,
)


def bench_import(reps: int) -> None:
    print("\n4. cold import (fresh interpreter per sample, wall time minus a bare interpreter)")
    targets = {
        "bare": "pass",
        "intermission": "import intermission",
        "intermission.notebook": "import intermission.notebook",
        "langgraph.graph": "import langgraph.graph",
    }
    samples: dict[str, list[float]] = {k: [] for k in targets}
    for _ in range(reps):
        for name, code in random.sample(list(targets.items()), len(targets)):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
            took = time.perf_counter() - t
            if proc.returncode == 0:
                samples[name].append(took)
    bare = statistics.median(samples["bare"])
    for name in ("intermission", "intermission.notebook", "langgraph.graph"):
        if not samples[name]:
            continue
        ms = (statistics.median(samples[name]) - bare) * 1e3
        target = verdict(ms <= 100) + " (≤ 100 ms)" if name == "intermission" else ""
        row(f"import {name}", f"{ms:.0f} ms", "", target)
