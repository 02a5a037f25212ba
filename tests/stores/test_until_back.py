"""``until_back``: a write that must not be lost is attempted again only once the database
said the last attempt did not commit — never blind, while it cannot be asked."""

from __future__ import annotations

import pytest

from intermission.errors import ConflictError, StoreUnavailableError
from intermission.stores._pool import until_back


def test_a_write_that_committed_unseen_is_not_attempted_again_while_the_check_fails() -> None:
    stored = {"version": 1}
    attempts: list[int] = []
    checks = iter([StoreUnavailableError("still restarting"), None])

    def attempt() -> int:
        attempts.append(stored["version"])
        if stored["version"] != 1:  # what a second save of the same copy meets
            raise ConflictError("s", 1, stored["version"])
        stored["version"] = 2  # committed, but the answer is lost with the connection
        raise StoreUnavailableError("lost", outcome_unknown=True)

    def check() -> int | None:
        failure = next(checks)
        if failure is not None:
            raise failure
        return stored["version"] if stored["version"] == 2 else None

    assert until_back(attempt, outage_s=5.0, check=check) == 2
    assert attempts == [1]  # once: the check, asked again, found it committed


def test_a_write_that_did_not_commit_is_attempted_again_once_the_check_says_so() -> None:
    attempts: list[int] = []

    def attempt() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise StoreUnavailableError("lost")
        return "saved"

    assert until_back(attempt, outage_s=5.0, check=lambda: None) == "saved"
    assert len(attempts) == 2


def test_a_check_that_never_answers_gives_up_at_the_outage_limit() -> None:
    def attempt() -> None:
        raise StoreUnavailableError("lost", outcome_unknown=True)

    def check() -> None:
        raise StoreUnavailableError("down")

    with pytest.raises(StoreUnavailableError):
        until_back(attempt, outage_s=0.3, check=check)
