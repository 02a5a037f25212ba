"""Make the legacy store fixtures from the project's own history (re-runnable).

For each historic store schema version this checks out (``git archive <commit> src``) the
earliest landed commit that wrote it into a temporary folder and runs *that release's
code* (``PYTHONPATH=<old src>:tests/legacy``) to write, with the agent of
``tests/legacy/agents.py``, two sessions:

- ``paused``: paused on the HITL approval of a ``delete_user`` call;
- ``finished``: answered at once, done;

into ``fixtures/schema<N>.sqlite`` and, when PostgreSQL is at hand, into a fresh schema
of the PostgreSQL database, dumped by ``pg_dump --inserts --no-owner`` into
``fixtures/schema<N>.pg.sql`` (the schema's name replaced by ``__SCHEMA__``, which the
tests put back as a schema of their own). ``fixtures/fixtures.json`` describes each
fixture: commit, schema, session ids, the paused call and the fingerprint the old
release recorded, and the agent definition used.

Run from the repository (needs its git history):

    INTERMISSION_PG_DSN=postgresql://… python tests/legacy/make_fixtures.py [--no-pg]

The files differ from run to run only in times and generated ids.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parent.parent

RELEASES: list[tuple[str, int, str, str]] = [
    # (fixture name, schema, commit, why this commit)
    ("schema1", 1, "b6800d2", "first store release (migration 1 as first written)"),
    ("schema2", 2, "8aa3b5c", "event log column (migration 2 as first written)"),
    ("schema3", 3, "d829c15", "history and forks: the family column"),
    ("schema4", 4, "a94f00a", "pending_since; fingerprints by the first algorithm"),
    ("schema5", 5, "15aeb4c", "schema 5 as first landed: audit at 4, due_ms at 5"),
    ("schema5-outbox", 5, "4ac7439", "schema 5 on the other branch: the outbox at 5"),
    ("schema6", 6, "78641c4", "principals and policies; fingerprints by the first algorithm"),
    ("schema7", 7, "6810089", "the merged numbering: outbox at 7"),
    ("schema8", 8, "9e91bb5", "the audit head in the session row"),
]
"""Schema 5 was written by two branches with different migrations under that number;
both landed, so both are fixtures."""

# Runs under the old release: its own intermission, this folder's agents.py.
_CHILD = r"""
import json, sys
import agents
from intermission.core.session import InMemoryAgentSession
from intermission.stores.open import open_store

target = sys.argv[1]
agent = agents.build_agent()
paused = InMemoryAgentSession.of("paused")
agent.prompt(agents.PAUSED_PROMPT).session(paused).call()
finished = InMemoryAgentSession.of("finished")
agent.prompt(agents.FINISHED_PROMPT).session(finished).call()
assert paused.status == "pending" and finished.status == "done", (paused.status, finished.status)
store = open_store(target)
store.save(paused)
store.save(finished)
with store._tx() as run:
    schema = run("SELECT MAX(version) FROM im_schema").fetchone()[0]
listed = list(store.pending())
store.close()
print(json.dumps({
    "schema": schema,
    "fingerprint": getattr(paused, "agent_fingerprint", None),
    "pending": [p.session_id for p in listed],
    "call": [t.call_uuid for p in listed for t in p.tasks],
}))
"""


def _run_release(src: Path, target: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI")}
    env["PYTHONPATH"] = f"{src}{os.pathsep}{HERE}"
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, target],
        env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"the old release failed writing {target}:\n{out.stderr}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _pg_fixture(dsn: str, name: str, src: Path, out: Path) -> dict[str, object]:
    import psycopg

    schema = "legacy_gen_" + re.sub(r"\W", "_", name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in dsn else "?"
    made = _run_release(src, f"{dsn}{sep}options={quote(f'-csearch_path={schema}')}")
    dump = subprocess.run(
        ["pg_dump", "--inserts", "--no-owner", "--no-privileges", "-n", schema, dsn],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    lines = [
        line
        for line in dump.splitlines()
        # psql's meta-commands and the dump's own search_path and schema are not SQL a
        # test replays: it makes the schema and sets its own search_path
        if not line.startswith("\\")
        and not line.startswith("SELECT pg_catalog.set_config('search_path'")
        and not line.startswith(("CREATE SCHEMA", "--"))
        and line.strip()
    ]
    out.write_text("\n".join(lines).replace(schema, "__SCHEMA__") + "\n")
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-pg", action="store_true", help="SQLite fixtures only")
    parser.add_argument("--only", help="one fixture name (schema4, …)")
    args = parser.parse_args()
    dsn = None if args.no_pg else os.environ.get("INTERMISSION_PG_DSN")
    FIXTURES.mkdir(exist_ok=True)
    index_path = FIXTURES / "fixtures.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for name, schema, commit, why in RELEASES:
        if args.only and name != args.only:
            continue
        full = subprocess.run(
            ["git", "rev-parse", commit], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(
                ["git", "archive", full, "src"], cwd=REPO, capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            src = Path(tmp) / "src"
            sqlite_file = FIXTURES / f"{name}.sqlite"
            sqlite_file.unlink(missing_ok=True)
            made = _run_release(src, str(sqlite_file))
            for extra in ("-wal", "-shm"):
                Path(f"{sqlite_file}{extra}").unlink(missing_ok=True)
            if made["schema"] != schema:
                raise SystemExit(f"{commit} wrote schema {made['schema']}, not {schema}")
            pg_made = _pg_fixture(dsn, name, src, FIXTURES / f"{name}.pg.sql") if dsn else {}
        earlier = index.get(name, {})
        index[name] = {
            "commit": full,
            "schema": schema,
            "why": why,
            "sqlite": f"{name}.sqlite",
            "postgres": f"{name}.pg.sql" if dsn else earlier.get("postgres"),
            # (each store was written by its own run: its call has its own id)
            "postgres_paused_call": pg_made["call"] if dsn else earlier.get("postgres_paused_call"),
            "sessions": {"paused": "paused", "finished": "finished"},
            "paused_call": made["call"],
            "fingerprint": made["fingerprint"],
            "agent": "tests/legacy/agents.py:build_agent (legacy-ops: delete_user asks first)",
        }
        print(f"{name}: {commit} schema {schema} fingerprint {made['fingerprint']}")
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
