"""intermission against LangGraph, Burr and plain-Python floors, in one process per measurement.

Every measurement runs all systems in the same process, interleaved in a new shuffled order
each round, and reports medians over rounds plus ratios computed within the run. Results are
printed and written as a table into bench/README.md (with the date and the machine). One
module per measurement (``node_step``, ``pause_resume``, ``history_cost``, ``outbox``,
``otel_cost``, ``commits``, ``scale``, ``cold_import``, ``rendering``, ``agui_latency``,
``resume_throughput``); this file runs them in order. The last two need a PostgreSQL database,
``INTERMISSION_BENCH_PG_DSN`` or ``INTERMISSION_PG_DSN`` (else it says so and is left out).

    make bench            # or: .venv-bench/bin/python bench/run.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agui_latency import bench_agui_latency
from cold_import import bench_import
from commits import bench_commits
from history_cost import bench_history, bench_history_steady
from node_step import bench_node_step
from otel_cost import bench_otel
from outbox import bench_outbox
from pause_resume import bench_pause_resume
from readme import write_readme
from rendering import bench_render
from resume_throughput import bench_resume_throughput
from scale import bench_memory_pending, bench_scale


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds and sessions")
    args = parser.parse_args()
    rounds = 5 if args.quick else 11
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        bench_node_step(rounds)
        bench_pause_resume(2 * rounds + 1, tmp)  # fsync is noisy: more rounds
        bench_history(2 * rounds + 1, tmp)
        bench_history_steady(60)
        bench_outbox(2 * rounds + 1, tmp, 100 if args.quick else 300)
        bench_otel(2 * rounds + 1, tmp)
        bench_commits(tmp)
        bench_scale(tmp, 2_000 if args.quick else 10_000, 100_000 if args.quick else 1_000_000)
        bench_memory_pending(tmp, 20_000 if args.quick else 100_000)
    bench_import(3 if args.quick else 7)
    bench_render()
    with tempfile.TemporaryDirectory() as d:
        bench_agui_latency(Path(d), 100 if args.quick else 500)
    bench_resume_throughput(60 if args.quick else 200, 3 if args.quick else 5)
    write_readme()
    print("\nwritten to bench/README.md")


if __name__ == "__main__":
    main()
