"""The audit chain, the same for every store: numbering, linking and hashing records, and
checking a stored chain (see :mod:`intermission.audit` for the formula).

A store keeps each record as ``(session_id, seq, text, hash)``: ``text`` is the canonical
JSON of the record without its hash, which is what the hash covers, so a store never
re-encodes a record to check it.

Chains and deletes: records are numbered per session id and never renumbered. Deleting a
session ends its chain with a ``session.deleted`` record (the tombstone) and keeps it: the
audit outlives the data. Records written under the id afterwards (a new session saved under
it) start a new chain, from 64 zeros, numbered on: they never continue the old session's
chain nor take its numbers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .._json import canonical_dumps
from ..audit import KEYED_LIMIT, UNKEYED_LIMIT, AuditEntry, AuditRecord, AuditVerification, Problem
from ..core.ledger import BY_HAND

__all__ = [
    "DELETED",
    "FORKED",
    "GENESIS",
    "KEY_ENV",
    "Head",
    "StoredRecord",
    "check_entries",
    "deleted_entry",
    "extend",
    "parse",
    "resolve_key",
    "verify",
    "with_effects",
]

GENESIS = "0" * 64
"""The ``prev`` of the first record of a chain."""

DELETED = "session.deleted"
"""The action of the record that ends a deleted session's chain."""

FORKED = "session.forked"
"""The action of a fork's first record (its ``prev`` is its parent's head)."""

StoredRecord = tuple[int, str, str]
"""A stored record: ``(seq, text, hash)``."""

KEY_ENV = "INTERMISSION_AUDIT_KEY"
"""The environment variable a store takes its audit key from (when ``audit_key`` is None)."""


def resolve_key(audit_key: str | bytes | None) -> bytes | None:
    """The store's audit key: ``audit_key`` (text or bytes), else ``$INTERMISSION_AUDIT_KEY``,
    else None (records are hashed, not keyed). An error never shows the key."""
    from ..errors import UsageError

    if audit_key is None:
        audit_key = os.environ.get(KEY_ENV) or None
        if audit_key is None:
            return None
    if isinstance(audit_key, str):  # (an environment's bytes that are not UTF-8: as given)
        audit_key = audit_key.encode("utf-8", "surrogateescape")
    if not isinstance(audit_key, bytes):
        raise UsageError(f"audit_key is text or bytes, not {type(audit_key).__name__}")
    if len(audit_key) < 16:
        raise UsageError(
            f"the audit key ({KEY_ENV} or audit_key=) is too short: use at least 16 bytes "
            "(say: python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return audit_key


@dataclass(frozen=True, slots=True)
class Head:
    """The last record of a session id."""

    seq: int
    hash: str
    closed: bool
    """True when it ends a deleted session's chain: the next record starts a new one."""

    @classmethod
    def of(cls, row: Sequence[Any] | None) -> Head | None:
        """The head from a stored ``(seq, text, hash)`` (None: no records)."""
        if row is None:
            return None
        # canonical JSON sorts keys, so "action" comes first: no need to parse the record
        closed = str(row[1]).startswith(f'{{"action":"{DELETED}"')
        return cls(int(row[0]), str(row[2]), closed)


def _digest(prev: str, text: str, key: bytes | None = None) -> str:
    data = (prev + text).encode("utf-8")
    if key is not None:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def _keyed(text: str) -> bool:
    """Whether a stored record's text says it is keyed (its top-level ``keyed``)."""
    try:
        return json.loads(text).get("keyed") is True
    except (ValueError, AttributeError):
        return False


def extend(
    session_id: str,
    head: Head | None,
    entries: Iterable[AuditEntry],
    now_ms: float,
    parent_head: Callable[[str], Head | None],
    key: bytes | None = None,
) -> list[StoredRecord]:
    """The records that append ``entries`` after ``head``, stamped ``now_ms`` (keyed with
    ``key``: HMAC-SHA256). A fork's ``session.forked`` entry that starts a chain links it
    to its parent's head (read with ``parent_head(parent_id)`` in the writer's
    transaction) and records that head's seq."""
    out: list[StoredRecord] = []
    seq = head.seq if head is not None else 0
    prev = head.hash if head is not None and not head.closed else None
    for entry in entries:
        fields = entry.model_dump(mode="json")
        if prev is None:  # a new chain
            prev = GENESIS
            parent = entry.detail.get("parent") if entry.action == FORKED else None
            if isinstance(parent, str):
                found = parent_head(parent)
                fields["detail"] = {**fields["detail"], "parent_seq": found.seq if found else 0}
                prev = found.hash if found is not None else GENESIS
        seq += 1
        fields.update(session_id=session_id, seq=seq, at_ms=now_ms, prev=prev)
        if key is not None:
            fields["keyed"] = True
        text = canonical_dumps(fields)
        prev = _digest(prev, text, key)
        out.append((seq, text, prev))
    return out


def parse(session_id: str, row: StoredRecord) -> AuditRecord:
    """A stored record as an :class:`AuditRecord` (a StoreError names one that is not)."""
    from ..errors import StoreError

    seq, text, digest = row
    try:
        return AuditRecord.model_validate({**json.loads(text), "hash": digest})
    except (ValueError, TypeError, ValidationError) as exc:
        raise StoreError(
            f"audit record {seq} of session {session_id!r} is unreadable ({exc}); "
            "check the chain with verify_audit (python -m intermission audit ID --verify)"
        ) from None


def verify(
    session_id: str,
    rows: Sequence[StoredRecord],
    parent_record: Callable[[str, int], StoredRecord | None],
    key: bytes | None = None,
) -> AuditVerification:
    """Check a session id's stored records (oldest first); ``parent_record(id, seq)``
    reads the record a fork's chain starts from. With ``key``, keyed records are checked by
    their MAC, and an unkeyed record is accepted only before the first keyed one (which
    seals it: its MAC covers the hash it follows); the chain must end keyed."""
    head = rows[-1][2] if rows else None
    limits = KEYED_LIMIT if key is not None else UNKEYED_LIMIT

    def broken(seq: int, problem: Problem, why: str) -> AuditVerification:
        return AuditVerification(
            session_id, len(rows), head, seq, problem, why, keyed=key is not None, limits=limits
        )

    expected, prev, closed = 1, GENESIS, True
    seen_keyed, unkeyed_from = False, None
    for i, (seq, text, stored) in enumerate(rows):
        if seq != expected:
            more = "" if seq == expected + 1 else f", and so are records up to {seq - 1}"
            return broken(expected, "missing", f"missing: it was deleted{more}")
        try:
            data = json.loads(text)
            record = AuditRecord.model_validate({**data, "hash": stored})
        except (ValueError, TypeError, ValidationError):
            return broken(seq, "unreadable", "unreadable: not an audit record")
        if record.seq != seq or record.session_id != session_id:
            return broken(
                seq,
                "chain",
                f"out of place: its content says it is record {record.seq} of session "
                f"{record.session_id!r} (records were renumbered, inserted or moved)",
            )
        if record.keyed and key is None:
            return broken(
                seq, "keyed", f"keyed (HMAC): it cannot be checked without the audit key; "
                f"set {KEY_ENV} to the store's key"
            )  # fmt: skip
        if key is not None and not record.keyed:
            if seen_keyed:
                return broken(
                    seq, "unkeyed", "written without the audit key after keyed records: "
                    "rewritten by someone who does not hold the key"
                )  # fmt: skip
            unkeyed_from = seq if unkeyed_from is None else unkeyed_from
        seen_keyed = seen_keyed or record.keyed
        own = _digest(record.prev, text, key if record.keyed else None)
        if own != stored:
            following = rows[i + 1][1] if i + 1 < len(rows) else None
            if following is not None and _prev_of(following) == own:
                return broken(seq, "hash", "hash changed: its content is intact, its hash is not")
            if record.keyed:
                return broken(
                    seq, "edited", "content edited: it no longer matches its MAC (or the "
                    "audit key is not the one it was written with)"
                )  # fmt: skip
            return broken(seq, "edited", "content edited: it no longer matches its hash")
        link = _link_problem(record, prev, closed, parent_record, key)
        if link:
            return broken(seq, "chain", link)
        expected, prev, closed = seq + 1, stored, record.action == DELETED
    if key is not None and unkeyed_from is not None and not seen_keyed:
        return broken(
            unkeyed_from, "unkeyed", "written without the audit key, and no keyed record "
            f"follows to seal it: written before {KEY_ENV} was set, or rewritten by someone "
            "who does not hold the key (the next record written with the key seals it)"
        )  # fmt: skip
    return AuditVerification(session_id, len(rows), head, keyed=key is not None, limits=limits)


def _prev_of(text: str) -> str | None:
    try:
        prev = json.loads(text).get("prev")
    except (ValueError, AttributeError):
        return None
    return prev if isinstance(prev, str) else None


def _link_problem(
    record: AuditRecord,
    prev: str,
    starts: bool,
    parent_record: Callable[[str, int], StoredRecord | None],
    key: bytes | None = None,
) -> str:
    """Why ``record`` does not follow the record before it ("" when it does)."""
    if not starts:
        if record.prev == prev:
            return ""
        return (
            f"chain broken: it does not follow record {record.seq - 1} (a record was "
            "inserted, replaced or rewritten before it)"
        )
    parent, at = record.detail.get("parent"), record.detail.get("parent_seq")
    if record.action == FORKED and isinstance(parent, str) and isinstance(at, int) and at > 0:
        found = parent_record(parent, at)
        point = f"record {at} of session {parent!r}"
        if found is None:
            return f"chain broken: it starts from {point}, which is missing"
        own = _digest(_prev_of(found[1]) or "", found[1], key if _keyed(found[1]) else None)
        if found[2] != record.prev or own != found[2]:
            return f"chain broken: it does not follow {point}, its fork point"
        return ""
    if record.prev == GENESIS:
        return ""
    return "chain broken: it starts a chain in the middle (the records before it were deleted)"


def deleted_entry() -> AuditEntry:
    """The tombstone that ends a deleted session's chain."""
    return AuditEntry(action=DELETED, via="api")


def check_entries(entries: Any) -> list[AuditEntry]:
    """The ``entries`` argument of ``append_audit`` (typed error before any write)."""
    from .._json import check_json
    from ..errors import UsageError

    if isinstance(entries, AuditEntry) or not isinstance(entries, (list, tuple)):
        raise UsageError(f"entries is a list of AuditEntry, not {type(entries).__name__}")
    for entry in entries:
        if not isinstance(entry, AuditEntry) or isinstance(entry, AuditRecord):
            raise UsageError(f"entries holds AuditEntry objects, not {type(entry).__name__}")
        check_json("audit detail", entry.detail)
    return list(entries)


def with_effects(noted: list[AuditEntry], effects: Sequence[AuditEntry | None]) -> list[AuditEntry]:
    """What a save writes: the noted entries, then the ledger entries it wrote (not a dry
    run's skips, nor an effect whose change by hand is noted: that record says it all)."""
    by_hand = {e.target for e in noted if e.action in BY_HAND}
    return [*noted, *(e for e in effects if e is not None and e.target not in by_hand)]
