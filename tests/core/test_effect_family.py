"""The ledger family is intermission's own generation (R48, issue 20 cases 6 and 8): a new
session under a deleted id starts a new family and inherits nothing; a fork of a dry-run
preview is a preview too, so an effect runs at most once among a root's descendants."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg

from intermission import InMemoryAgentSession, decide_graph
from intermission.examples import build_change_graph
from intermission.testing.conformance import paused_change
from intermission.testing.workers import EFFECT_KEY, append_effect


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    from intermission.stores import MemoryStore, SQLiteStore

    if request.param == "memory":
        made: Any = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "f.db")
    else:
        made = fresh_pg()
    yield made
    made.close()


def _approve_and_resume(store: Any, sid: str, effect: Any) -> str:
    s = store.load(sid)
    decide_graph(s, "APPROVE", reviewer="alice")
    store.save(s)
    with store.resume(sid) as s:
        response = build_change_graph(effect).prompt().session(s).call()
    return str(response.content)


def _runs(log: Path) -> int:
    return log.read_text().count("change-001") if log.exists() else 0


def test_a_new_session_under_a_deleted_id_starts_a_new_family(
    store: Any, tmp_path: Path
) -> None:  # case 8
    log = tmp_path / "effect.log"
    effect = append_effect(str(log))
    store.save(paused_change("root"))
    store.fork("root", "f1")
    _approve_and_resume(store, "f1", effect)
    assert _runs(log) == 1
    store.delete("root")  # f1 keeps the old family's ledger alive
    store.save(paused_change("root"))  # a brand-new session, the same id
    reborn = store.load("root")
    assert EFFECT_KEY not in reborn.ledger  # it inherits nothing
    assert reborn.ledger_id != store.load("f1").ledger_id
    answer = _approve_and_resume(store, "root", effect)
    assert answer == "Change executed: applied change-001" and _runs(log) == 2
    # the old family is untouched: f1 still holds its own record of where it ran
    assert store.load("f1").ledger[EFFECT_KEY].by == "f1"


def test_a_restored_snapshot_is_the_same_generation_not_a_new_one(
    store: Any, tmp_path: Path
) -> None:
    log = tmp_path / "effect.log"
    store.save(paused_change("root"))
    snapshot = store.load("root").to_json()
    store.fork("root", "f1")
    _approve_and_resume(store, "f1", append_effect(str(log)))
    store.delete("root")
    store.put_snapshot(snapshot)  # the same session back, not a new one: same family
    assert store.load("root").ledger[EFFECT_KEY].status == "completed"
    _approve_and_resume(store, "root", append_effect(str(log)))
    assert _runs(log) == 1


@pytest.mark.parametrize("second", ["shared", "dry-run", "separate"])
def test_a_fork_of_a_dry_run_preview_is_a_preview(
    store: Any, tmp_path: Path, second: str
) -> None:  # case 6
    log = tmp_path / "effect.log"
    effect = append_effect(str(log))
    store.save(paused_change("root"))
    store.fork("root", "p", effects="dry-run")
    fork = store.fork("p", "q", effects=second)
    assert fork.effects == "dry-run" and store.load("q").effects == "dry-run"
    assert _approve_and_resume(store, "q", effect).startswith("Change executed: [dry run]")
    assert _runs(log) == 0  # a preview of a preview touches nothing
    assert _approve_and_resume(store, "root", effect).endswith("applied change-001")
    assert _runs(log) == 1
    # and forks of forks of the preview stay previews, also after the effect ran
    deeper = store.fork("q", "q2", at=0)
    assert deeper.effects == "dry-run"
    assert _approve_and_resume(store, "q2", effect).startswith("Change executed")
    assert _runs(log) == 1


def test_a_fork_of_a_preview_in_memory_is_a_preview_too(tmp_path: Path) -> None:
    log = tmp_path / "effect.log"
    root = paused_change("root")
    preview = root.fork("p", effects="dry-run")
    fork = preview.fork("q")  # the default, "shared"
    assert fork.effects == "dry-run"
    decide_graph(fork, "APPROVE", reviewer="alice")
    build_change_graph(append_effect(str(log))).prompt().session(fork).call()
    decide_graph(root, "APPROVE", reviewer="alice")
    build_change_graph(append_effect(str(log))).prompt().session(root).call()
    assert _runs(log) == 1
    assert fork.ledger_id != root.ledger_id  # its skips are in its own ledger


def test_a_session_mints_its_own_family_and_old_snapshots_keep_theirs() -> None:
    a, b = InMemoryAgentSession("same"), InMemoryAgentSession("same")
    assert a.ledger_id != b.ledger_id and a.ledger_id != "same"  # minted, never borrowed
    assert InMemoryAgentSession.restore(a.to_json()).ledger_id == a.ledger_id
    old = json.loads(a.to_json())
    old.pop("family")  # a snapshot written before families were minted
    legacy = InMemoryAgentSession.restore(old)
    assert legacy.family is None and legacy.ledger_id == "same"  # as before
    assert legacy.fork is not None


def _legacy(session: InMemoryAgentSession, family: str | None) -> dict[str, Any]:
    """The session's snapshot as written before families were minted."""
    data = json.loads(session.to_json())
    data.pop("family", None)
    if family is not None:
        data["family"] = family
    return data


def test_sessions_stored_before_families_were_minted_behave_as_before(
    store: Any, tmp_path: Path
) -> None:
    log = tmp_path / "effect.log"
    root = paused_change("root")
    store.put_snapshot(_legacy(root, None))  # a root: its ledger keyed by its id
    store.put_snapshot(_legacy(root.fork("f1"), "root"))  # its fork, family = the root id
    assert store.load("root").ledger_id == "root" == store.load("f1").ledger_id
    _approve_and_resume(store, "f1", append_effect(str(log)))
    assert store.load("root").ledger[EFFECT_KEY].by == "f1"  # one ledger, as before
    store.fork("root", "f2")  # a new fork of an old root joins the old family
    assert _approve_and_resume(store, "f2", append_effect(str(log))).endswith("change-001")
    assert _runs(log) == 1
    store.delete("root")
    store.save(paused_change("root"))  # new under the old id: a new family
    _approve_and_resume(store, "root", append_effect(str(log)))
    assert _runs(log) == 2
    store.delete("f1")
    store.delete("f2")  # the last of the old family: its ledger goes, the new one stays
    assert store.load("root").ledger[EFFECT_KEY].by == "root"
    assert "root" not in _ledgers(store)  # (the old id-keyed rows are gone)


def _ledgers(store: Any) -> set[str]:
    """The ledger families a store holds rows for."""
    if hasattr(store, "_ledgers"):
        return {k for k, v in store._ledgers.items() if v}
    with store._tx("read") as run:
        return {r[0] for r in run("SELECT DISTINCT session_id FROM im_ledger").fetchall()}
