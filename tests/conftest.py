"""Shared fixtures: ``make_store`` makes fresh stores of each kind (memory, SQLite, and
PostgreSQL at INTERMISSION_PG_DSN); shared helpers live in tests/_helpers.py. The totals
tests keep (the fault-injection suite's, the properties') are printed at the end of the run,
also under ``pytest -n`` (pytest-xdist), whose workers hand theirs to the controller."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests import _helpers
from tests._helpers import XDIST_WORKER, fresh_pg
from tests.faults import _helpers as faults

from intermission.stores import MemoryStore, SQLiteStore

STORES = ["memory", "sqlite", "postgres"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``serial`` test changes what other processes share (it restarts the PostgreSQL
    cluster): in a worker of ``pytest -n`` it would break the tests running beside it."""
    if XDIST_WORKER and item.get_closest_marker("serial"):
        pytest.fail(
            "a serial test runs alone: run it without -n (`make unit` runs "
            "`pytest -m serial` after the parallel pass)",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a worker of ``pytest -n``: hand this worker's totals to the controller."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["intermission_totals"] = {"faults": faults.TOTALS, "lines": _helpers.END_LINES}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """In the controller of ``pytest -n``: add a finished worker's totals to the run's."""
    totals = getattr(node, "workeroutput", {}).get("intermission_totals")
    if totals:
        faults.add_totals(totals["faults"])
        _helpers.END_LINES.extend(totals["lines"])


def pytest_terminal_summary(terminalreporter: Any) -> None:
    faults.write_totals(terminalreporter)
    for line in _helpers.END_LINES:
        terminalreporter.write_line(line)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, tmp_path: Any) -> Iterator[Callable[..., Any]]:
    opened: list[Any] = []

    def make(**kw: Any) -> Any:
        if store_kind == "memory":
            store: Any = MemoryStore(**kw)
        elif store_kind == "sqlite":
            store = SQLiteStore(tmp_path / f"s{len(opened)}.db", **kw)
        else:
            store = fresh_pg(**kw)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def receiver() -> Iterator[Any]:
    """A webhook/Slack receiver on 127.0.0.1 (tests/notify/_receivers.py), stopped after the
    test; a module that needs another kind or scope defines its own."""
    from tests._helpers import need_module

    need_module("httpx", "the HTTP targets need httpx (extra notify)")
    from tests.notify._receivers import Receiver

    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def mailbox() -> Iterator[Any]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1 keeping what it is sent, stopped after
    the test."""
    from tests._helpers import need_module

    need_module("aiosmtpd", "the email tests need aiosmtpd (extra dev)")
    from tests.notify._receivers import Mailbox

    box = Mailbox()
    yield box
    box.stop()
