"""Issue 24.2 / R39: reviewers deciding at the same moment. A paused session S and its fork
S.F; alice approves S.F, bob rejects S.F, carol approves S — three real CLI processes
started together, round after round. Exactly one decision per session wins, it is applied
once, nobody is left pending with a winning decision, and the family's effect runs at
most once. Before, the loser held the claim to check its conflicting decision; the
winner's resume met that claim and exited 2 ("being resumed by someone else"), leaving
S.F pending with the winning decision recorded but never applied.

The property test runs any mix of N reviewers (API and widget code twins, in threads, each
with its own store connection) on a session and its fork, with the same invariants."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import fresh_pg, pg_dsn
from tests.faults._helpers import lines, tally
from tests.faults._race_agents import change_graph

from intermission import (
    DecisionConflictError,
    InMemoryAgentSession,
    NothingToResumeError,
    decide_graph,
)
from intermission.examples import build_change_graph
from intermission.stores import SQLiteStore
from intermission.testing.workers import append_effect

AGENTS = "tests.faults._race_agents:AGENTS"
ROUNDS = {
    "sqlite": int(os.environ.get("IM_RACE_SQLITE", 15)),  # (more: IM_RACE_SQLITE=200)
    "postgres": int(os.environ.get("IM_RACE_PG", 10)),
}


def _paused_family(store: Any, sid: str) -> None:
    s = InMemoryAgentSession.of(sid)
    change_graph().prompt("Upgrade the order service").session(s).call()
    assert s.is_pending
    store.save(s)
    store.fork(sid, f"{sid}.F")


def _start(args: list[str], target: str, effects: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "IM_EFFECT_FILE": str(effects),
    }  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "intermission", "--agents", AGENTS, *args, "--store", target],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
    )  # fmt: skip


def _stranded(store: Any, sid: str) -> bool:
    """Pending with a decision recorded: a winner nobody applied."""
    s = store.load(sid)
    return s.is_pending and s.context.get("approval.decision") is not None


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_three_reviewers_through_the_cli_always_apply_the_winner(kind: str, tmp_path: Path) -> None:
    if kind == "sqlite":
        target = str(tmp_path / "race.sqlite")
        store: Any = SQLiteStore(target)
    else:
        target, store = pg_dsn(), fresh_pg()
    wins = refusals = stranded = effects_max = 0
    odd: list[str] = []
    for r in range(ROUNDS[kind]):
        sid = f"S-{r}"
        fork = f"{sid}.F"
        _paused_family(store, sid)
        effects = tmp_path / f"effects-{r}"
        commands = {
            "alice": ["approve", fork, "--reviewer", "alice"],
            "bob": ["reject", fork, "--reason", "no", "--reviewer", "bob"],
            "carol": ["approve", sid, "--reviewer", "carol"],
        }
        procs = {who: _start(cmd, target, effects, tmp_path) for who, cmd in commands.items()}
        done = {who: (p.wait(timeout=120), *p.communicate()) for who, p in procs.items()}
        codes = {who: code for who, (code, _out, _err) in done.items()}
        for who, (code, out, err) in done.items():
            if code == 0:
                wins += 1
            elif any(
                told in err
                for told in ("already decided", "nothing to resume", "nothing waits for a decision")
            ):
                refusals += 1
            else:
                odd.append(f"round {r} {who}: exit {code} {out!r} {err!r}")
        # S: carol is alone, she wins; S.F: exactly one of alice and bob wins, the other
        # is told who did; the fork ends as the winner decided, decided once
        f, s = store.load(fork), store.load(sid)
        winner = "alice" if codes["alice"] == 0 else "bob"
        loser = "bob" if winner == "alice" else "alice"
        expected = "applied change-001" if winner == "alice" else "Change rejected: no"
        checks = {
            "carol won": codes["carol"] == 0,
            "one of alice and bob won": sorted((codes["alice"], codes["bob"])) == [0, 2],
            "the loser is told who won": f"by {winner}" in done[loser][2],
            "the fork is done": f.status == "done",
            # (the CLI decides as its OS user; --reviewer is the display name it records)
            "as the winner decided": (f.context.get("approval.by") or {}).get("display") == winner
            and f.context.get("change.result") == expected,
            "decided once": [e.kind for e in f.events].count("approval_decided") == 1,
            "S applied carol's approval": s.context.get("change.result") == "applied change-001",
        }
        odd += [f"round {r}: not {what}: {done}" for what, ok in checks.items() if not ok]
        stranded += _stranded(store, sid) + _stranded(store, fork)
        effects_max = max(effects_max, lines(effects))
    store.close()
    print(
        f"\nthree reviewers via the CLI on {kind}: {ROUNDS[kind]} rounds, {wins} wins, "
        f"{refusals} refusals, {stranded} stranded, at most {effects_max} effect per family"
    )
    tally(
        f"three reviewers, CLI, {kind} ({wins} wins)", trials=ROUNDS[kind],
        effects=effects_max, expected=1, lost=stranded, refused=refusals,
    )  # fmt: skip
    assert stranded == 0 and effects_max <= 1, (stranded, effects_max)
    assert not odd, odd[:5]
    assert wins == 2 * ROUNDS[kind] and refusals == ROUNDS[kind]


# -- the property: any N reviewers, API and widget code twins ----------------------------
REVIEWER = st.tuples(
    st.sampled_from(["S", "S.F"]),
    st.sampled_from(["APPROVE", "REJECT"]),
    st.sampled_from(["api", "widget"]),
)


def _review(path: str, effects: str, sid: str, verdict: str, how: str, who: str) -> str:
    """One reviewer with its own connection: "won" (applied here or by someone else
    meanwhile, the same decision) or "refused" (a different decision won first)."""
    store = SQLiteStore(path)
    graph = build_change_graph(append_effect(effects))
    try:
        if how == "widget":
            from intermission.notebook import ApprovalWidget

            widget = ApprovalWidget(graph, store.load(sid), store=store, reviewer=who)
            if verdict == "APPROVE":
                widget.approve()
            else:
                widget.reject("no")
        else:
            from intermission.stores import decide_and_resume

            decide_and_resume(
                store, sid,
                lambda s: decide_graph(s, verdict, reviewer=who, reason="no"),  # type: ignore[arg-type]
                graph,
            )  # fmt: skip
        return "won"
    except DecisionConflictError as exc:
        assert exc.verdict != verdict
        return "refused"
    except NothingToResumeError as exc:  # it read the session after the winner finished
        return "late: " + str(exc).rsplit("its last decision was ", 1)[-1].split(" ")[0]
    finally:
        store.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reviewers=st.lists(REVIEWER, min_size=2, max_size=5))
def test_any_reviewers_at_once_one_decision_wins_and_is_applied_once(
    reviewers: list[tuple[str, str, str]], tmp_path: Path
) -> None:
    base = tmp_path / f"p{os.urandom(4).hex()}"
    base.mkdir()
    path, effects = str(base / "p.sqlite"), str(base / "effects")
    store = SQLiteStore(path)
    s = InMemoryAgentSession.of("S")
    build_change_graph(append_effect(effects)).prompt("Upgrade").session(s).call()
    store.save(s)
    store.fork("S", "S.F")
    results: list[tuple[str, str, str]] = []
    start = threading.Barrier(len(reviewers))

    def run(i: int, sid: str, verdict: str, how: str) -> None:
        start.wait()
        try:
            outcome = _review(path, effects, sid, verdict, how, f"r{i}")
        except BaseException as exc:  # reported by the assertion below
            outcome = f"{type(exc).__name__}: {exc}"
        results.append((sid, verdict, outcome))

    threads = [threading.Thread(target=run, args=(i, *r)) for i, r in enumerate(reviewers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == len(reviewers)
    assert all(o in ("won", "refused", "late: APPROVE", "late: REJECT") for *_, o in results), (
        results
    )
    for sid in ("S", "S.F"):
        mine = [(v, o) for s_, v, o in results if s_ == sid]
        if not mine:
            assert store.load(sid).is_pending
            continue
        final = store.load(sid)
        assert final.status == "done"  # nobody left pending with a winning decision
        won = final.context.get("approval.decision")
        assert [e.kind for e in final.events].count("approval_decided") == 1
        # one verdict won: a reviewer of it won (or came late and was told so), every other
        # one was refused or told who won
        assert all(o in (("won" if v == won else "refused"), f"late: {won}") for v, o in mine), (
            mine,
            won,
        )
        assert any(o == "won" for _v, o in mine), (mine, won)
        ran = [e for e in final.events if e.kind == "node_start"
               and getattr(e, "node_id", None) in ("executor_agent", "reject_finish")]  # fmt: skip
        assert len(ran) == 1  # applied once
    assert lines(Path(effects)) <= 1  # the family's effect, at most once
    store.close()
