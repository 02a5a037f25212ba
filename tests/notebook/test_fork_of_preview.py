"""History's *Fork from here* on a dry-run preview makes a preview (R48, issue 20 case 6):
the widget follows the core rule, an effect runs at most once among a root's descendants."""

from __future__ import annotations

from pathlib import Path

from tests._helpers import need_module

from intermission import decide_graph
from intermission.examples import build_change_graph
from intermission.stores import MemoryStore
from intermission.testing.conformance import paused_change
from intermission.testing.workers import append_effect


def _approve_and_resume(store: MemoryStore, sid: str, log: Path) -> None:
    s = store.load(sid)
    decide_graph(s, "APPROVE", reviewer="alice")
    store.save(s)
    with store.resume(sid) as s:
        build_change_graph(append_effect(str(log))).prompt().session(s).call()


def test_fork_from_here_on_a_preview_makes_a_preview(tmp_path: Path) -> None:
    need_module("ipywidgets", "the History widget needs ipywidgets (extra notebook)")
    from intermission.notebook import History

    log = tmp_path / "effect.log"
    store = MemoryStore()
    store.save(paused_change("root"))
    store.fork("root", "p", effects="dry-run")
    widget = History(build_change_graph(), store.load("p"), store=store)
    fork = widget.fork_from_here("p.fork1", effects="shared").session
    assert fork.effects == "dry-run" and store.load("p.fork1").effects == "dry-run"
    _approve_and_resume(store, "p.fork1", log)
    assert not log.exists()
    _approve_and_resume(store, "root", log)
    assert log.read_text().count("change-001") == 1
