"""An expiry is the deadline's decision, and every view says so (issue 39): ``intermission
show``, the widgets and the timeline name the deadline, never "an unnamed reviewer" (a
policy's ``on_expire`` records a timed-out decision with no reviewer)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.hitl.test_policy_deadlines import agent

from intermission import ApprovalPolicy, InMemoryAgentSession
from intermission.examples import build_change_graph
from intermission.stores import SQLiteStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def _expiring(db: Path, kind: str, on_expire: str) -> None:
    store = SQLiteStore(db)
    policy = ApprovalPolicy(expires_after_ms=1, on_expire=on_expire)  # type: ignore[arg-type]
    s = InMemoryAgentSession(kind)
    if kind == "tool":
        agent(policy).prompt("deploy").session(s).call()
    else:
        build_change_graph(change_id="g-1", policy=policy).prompt("change it").session(s).call()
    store.save(s)  # (pending; or, a 1 ms deadline being past already, rejected at once)
    store.close()


@pytest.mark.parametrize(("kind", "on_expire"), [("tool", "reject"), ("tool", "approve"),
                                                 ("graph", "reject")])  # fmt: skip
def test_show_names_the_deadline_as_the_decider_of_an_expiry(
    kind: str, on_expire: str, tmp_path: Path
) -> None:
    db = tmp_path / "expiry.db"
    _expiring(db, kind, on_expire)
    swept = _cli("sweep", "--store", str(db))  # the expiry is recorded, if not yet
    assert swept.returncode == 0, swept.stderr
    show = _cli("show", kind, "--store", str(db))
    assert show.returncode == 0, show.stderr
    (line,) = [x for x in show.stdout.splitlines() if x.startswith("decision:")]
    assert "unnamed" not in show.stdout
    assert f"{on_expire.upper()} by the deadline at " in line, line
    assert "nobody decided before the deadline" in line


def _expired_session() -> Any:
    # A deadline a minute away, passed by asking at a time two minutes on: a 1 ms deadline
    # could pass while the run is still pausing on a loaded machine (it is then applied at once).
    policy = ApprovalPolicy(expires_after_ms=60_000)
    s = InMemoryAgentSession("w")
    agent(policy).prompt("deploy").session(s).call()
    assert s.is_pending
    from intermission.hitl.timeouts import apply_deadlines

    assert apply_deadlines(s, s.clock.now_ms() + 120_000)
    return s


def test_the_widgets_and_the_timeline_name_the_deadline_too() -> None:
    from intermission.notebook._decided import who_html
    from intermission.notebook.timeline import render_timeline

    assert who_html(None, None, True) == "<i>the deadline</i>"
    assert who_html("system:deadline") == "<i>the deadline</i>"
    s = _expired_session()
    agent(ApprovalPolicy(expires_after_ms=60_000)).prompt().session(s).call()  # applies it
    html = render_timeline(s.events)
    assert "by the deadline" in html and "no reviewer named" not in html

