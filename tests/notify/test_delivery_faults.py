"""At least once, with a key, under faults — SQLite and PostgreSQL, real processes, a real
receiver on 127.0.0.1 counting keys:

- a dispatcher SIGKILLed after sending and before recording it: sent again, same key;
- the process that paused SIGKILLed right after the commit, before any dispatch: delivered
  later by another process;
- a save refused by compare-and-set or a lost claim: nothing sent;
- the receiver down for a while: delivered once it is back;
- three dispatchers on one PostgreSQL store: each notification delivered once;
- a notification that keeps failing goes dead, is listed, and ``outbox --retry`` sends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need_module, pg_dsn
from tests.notify._receivers import SECRET, Receiver, wait_until

from intermission import ConflictError, InMemoryAgentSession, LeaseLostError
from intermission.examples import build_ops_agent
from intermission.notify import Notifier, Webhook
from intermission.stores import SQLiteStore
from intermission.testing.conformance import paused_ops

ROOT = Path(__file__).resolve().parents[2]
SECRET_ENV = "IM_NOTIFY_TEST_SECRET"


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL for this test's processes (an emptied PostgreSQL database, or a file)."""
    need_module("httpx", "the HTTP targets need httpx (extra notify)")
    if request.param == "postgres":
        store = fresh_pg()
        store.close()
        yield pg_dsn()  # (this xdist worker's database)
    else:
        yield str(tmp_path / "s.db")


def opened(url: str, **kw: Any) -> Any:
    from intermission.stores import open_store

    return open_store(url, **kw)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def config(
    tmp_path: Path, receiver: Receiver, *, lease_s: float = 1.0, poll_s: float = 0.05
) -> Path:
    path = tmp_path / "notify.yaml"
    path.write_text(
        textwrap.dedent(f"""
        public_url: https://review.example.com
        poll_s: {poll_s}
        lease_s: {lease_s}
        retry_first_s: 0.05
        retry_max_s: 0.2
        max_attempts: 3
        targets:
          - type: webhook
            name: hook
            url: {receiver.url}/hook
            secret_env: {SECRET_ENV}
    """)
    )
    return path


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "intermission", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    if check:
        assert done.returncode == 0, done.stderr
    return done


def dispatcher(url: str, cfg: Path, log: Path) -> subprocess.Popen[str]:
    """``python -m intermission notify`` in the background (its log in a file)."""
    env = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    with open(log, "a") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "intermission", "notify", "--store", url, "--config",
             str(cfg)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip


def test_a_dispatcher_killed_after_sending_is_followed_by_the_same_key_again(
    where: str, tmp_path: Path, receiver: Receiver
) -> None:
    store = opened(where, outbox=True)
    store.save(paused_ops("k1"))
    (row,) = store.outbox.rows()
    cfg = config(tmp_path, receiver)
    log = tmp_path / "dispatchers.log"
    first = dispatcher(where, cfg, log)
    receiver.on_request = lambda _: (os.kill(first.pid, signal.SIGKILL), time.sleep(0.5))
    assert first.wait(120) == -signal.SIGKILL
    receiver.on_request = None
    assert receiver.keys == {row.key: 1}  # it was sent…
    (unsettled,) = store.outbox.rows()  # …and never recorded as sent
    assert unsettled.status == "pending" and unsettled.attempts == 0
    second = dispatcher(where, cfg, log)  # takes it once the first one's lease ends
    try:
        wait_until(lambda: store.outbox.rows() == [], what="redelivery")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, log.read_text()
    assert receiver.keys == {row.key: 2} and receiver.bad == 0  # the same key, twice
    assert receiver.bodies[0] == receiver.bodies[1]  # the same notification
    store.close()


CHILD = """
import os, signal, sys
from intermission import InMemoryAgentSession
from intermission.examples import build_ops_agent
from intermission.notify import Notifier, Webhook
from intermission.stores import open_store

store = open_store(sys.argv[1], outbox=True)
# a dispatcher runs in this very process (as serve --notify does)…
notifier = Notifier(store, [Webhook(sys.argv[2], secret=os.environ["IM_NOTIFY_TEST_SECRET"])])
notifier.start(poll_s=0.01)
# …and the process dies the moment the pause's save has committed, before it can dispatch
store.outbox.wake.set = lambda: os.kill(os.getpid(), signal.SIGKILL)
s = InMemoryAgentSession.of("crash")
build_ops_agent().prompt("delete user 1001").session(s).call()
store.save(s)
print("not reached")
"""


def test_a_process_killed_right_after_the_commit_loses_no_notification(
    where: str, tmp_path: Path, receiver: Receiver
) -> None:
    env = {**os.environ, SECRET_ENV: SECRET, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, where, receiver.url + "/hook"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "not reached" not in child.stdout and receiver.total() == 0
    store = opened(where)
    assert store.load("crash").is_pending  # the pause committed…
    (row,) = store.outbox.rows()  # …with its notification
    notifier = Notifier(store, [Webhook(receiver.url + "/hook", secret=SECRET)])
    assert notifier.deliver_pending() == 1
    assert receiver.keys == {row.key: 1} and receiver.bodies[0]["session"]["id"] == "crash"
    store.close()


def test_a_save_refused_by_compare_and_set_or_a_lost_claim_sends_nothing(
    where: str, receiver: Receiver
) -> None:
    store = opened(where, outbox=True, lease_ms=150, heartbeat=False)
    agent = build_ops_agent()
    store.save(InMemoryAgentSession.of("r"))
    a, b = store.load("r"), store.load("r")
    agent.prompt("delete user 1").session(a).call()
    agent.prompt("delete user 2").session(b).call()
    store.save(a)
    with pytest.raises(ConflictError):
        store.save(b)
    with pytest.raises(LeaseLostError), store.resume("r") as mine:
        time.sleep(0.3)
        with store.resume("r") as theirs:
            theirs.context.put("by", "theirs")
        mine.pending(True, "a pause that must not be told")
    notifier = Notifier(store, [Webhook(receiver.url + "/hook", secret=SECRET)])
    assert notifier.deliver_pending() == 1
    (body,) = receiver.bodies
    assert body["interrupts"][0]["arguments"] == {"user_id": 1001}  # a's, the one saved
    assert receiver.total() == 1 and "must not be told" not in str(receiver.bodies)
    store.close()


def test_a_receiver_that_was_down_gets_it_once_it_is_back(where: str, receiver: Receiver) -> None:
    store = opened(where, outbox=True)
    receiver.stop()
    store.save(paused_ops("down"))
    notifier = Notifier(store, [Webhook(receiver.url + "/hook", secret=SECRET)],
                        retry_first_s=0.05, retry_max_s=0.2)  # fmt: skip
    assert notifier.deliver_pending() == 0
    assert notifier.deliver_pending() == 0  # not due yet, or down again
    (row,) = store.outbox.rows()
    assert row.status == "pending" and row.attempts >= 1
    assert "could not reach the receiver (ConnectError)" in (row.last_error or "")
    receiver.start()
    wait_until(lambda: notifier.deliver_pending() == 1 or store.outbox.rows() == [])
    assert receiver.keys == {row.key: 1} and store.outbox.rows() == []  # delivered: gone
    store.close()


def test_a_notification_that_keeps_failing_is_dead_listed_and_retried_by_the_cli(
    where: str, tmp_path: Path, receiver: Receiver
) -> None:
    store = opened(where, outbox=True)
    store.save(paused_ops("dead"))
    (row,) = store.outbox.rows()
    receiver.status = 500
    cfg = config(tmp_path, receiver)
    from intermission.notify import notifier_from

    os.environ[SECRET_ENV] = SECRET
    try:
        notifier = notifier_from(store, cfg)  # as the CLI reads it
    finally:
        del os.environ[SECRET_ENV]
    wait_until(lambda: notifier.deliver_pending() == 0 and bool(store.outbox.rows("dead")))
    (dead,) = store.outbox.rows("dead")
    assert dead.attempts == 3 and "hook: the receiver answered HTTP 500" in (dead.last_error or "")
    listed = cli("outbox", "--store", where, "--failed").stdout
    assert row.key in listed and "HTTP 500" in listed and "dead" in listed
    receiver.status = 200
    retried = cli("outbox", "--store", where, "--retry", row.key)
    assert f"notification {row.key} (pending, session dead) is due again" in retried.stdout
    once = cli("notify", "--store", where, "--config", str(cfg), "--once").stdout
    assert once.splitlines() == ["notifications go to hook", "delivered 1"]
    assert receiver.keys[row.key] == 4  # three failed attempts and the one that worked
    assert store.outbox.rows() == []  # delivered: it left the outbox
    again = cli("outbox", "--store", where, "--retry", row.key, check=False)
    assert again.returncode == 2 and "a delivered one leaves it" in again.stderr
    assert cli("outbox", "--store", where).stdout == "the outbox is empty\n"
    store.close()


def test_three_dispatchers_on_one_postgresql_store_deliver_each_notification_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    store = fresh_pg(outbox=True)
    dsn = pg_dsn()  # (this xdist worker's database, which fresh_pg emptied)
    cfg = config(tmp_path, receiver, lease_s=120, poll_s=0.02)
    log = tmp_path / "dispatchers.log"
    rounds = int(os.environ.get("IM_NOTIFY_ROUNDS", "30"))
    for i in range(rounds):
        store.save(paused_ops(f"many-{i}"))
    receiver.on_request = lambda _: time.sleep(0.05)  # slow: the dispatchers overlap
    procs = [dispatcher(dsn, cfg, log) for _ in range(3)]
    try:
        for i in range(rounds, rounds + 5):  # and some while they run
            store.save(paused_ops(f"many-{i}"))
        rounds += 5
        wait_until(lambda: receiver.total() >= rounds
                   and store.outbox.rows() == [],
                   timeout_s=180, what="every notification delivered")  # fmt: skip
        time.sleep(0.3)  # (a duplicate would arrive now)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(60) for p in procs]
    assert codes == [0, 0, 0], log.read_text()
    assert receiver.url not in log.read_text()  # (a target's URL may hold a credential)
    assert len(receiver.keys) == rounds and set(receiver.keys.values()) == {1}
    assert receiver.bad == 0
    store.close()


def test_an_in_process_notifier_wakes_on_the_commit(tmp_path: Path, receiver: Receiver) -> None:
    """A dispatcher in the process that saves (``serve --notify``) is woken by the commit,
    not by its next poll."""
    store = SQLiteStore(tmp_path / "w.db", outbox=True)
    notifier = Notifier(store, [Webhook(receiver.url + "/hook", secret=SECRET)])
    notifier.start(poll_s=3600)  # it would never poll within this test
    try:
        time.sleep(0.1)
        store.save(paused_ops("wake"))
        wait_until(lambda: receiver.total() == 1, timeout_s=60, what="the woken dispatcher")
    finally:
        notifier.stop()
    store.close()


def test_a_sigterm_mid_delivery_sends_nothing_new_and_hands_the_rest_back(
    tmp_path: Path, receiver: Receiver
) -> None:
    """SIGTERM while a slow receiver holds one notification: that one finishes, the others
    taken with it are not sent by the stopping dispatcher but handed back at once (due
    now, not after its lease)."""
    where = str(tmp_path / "t.db")
    store = opened(where, outbox=True)
    for i in range(3):
        store.save(paused_ops(f"term-{i}"))
    cfg = config(tmp_path, receiver, lease_s=600)
    log = tmp_path / "dispatcher.log"
    proc = dispatcher(where, cfg, log)
    receiver.on_request = lambda _: (proc.send_signal(signal.SIGTERM), time.sleep(0.3))
    assert proc.wait(120) == 0, log.read_text()
    receiver.on_request = None
    assert receiver.total() == 1, log.read_text()  # the one in flight, nothing after
    assert len(store.outbox.rows()) == 2
    once = cli("notify", "--store", where, "--config", str(cfg), "--once").stdout
    assert once.splitlines()[-1] == "delivered 2"  # not leased for another ten minutes
    assert len(receiver.keys) == 3 and set(receiver.keys.values()) == {1}
    store.close()
