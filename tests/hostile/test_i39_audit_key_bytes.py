"""Issue 39, attacked: an ``INTERMISSION_AUDIT_KEY`` whose bytes are not UTF-8 (a key read
from /dev/urandom into the environment) crashed every command with a UnicodeEncodeError
traceback. The key is its bytes, as given: records are keyed with them, verify, and a key
that differs in one byte does not verify. Through the CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.stores.test_audit_missing import target

from intermission.stores import open_store
from intermission.testing.conformance import paused_change

__all__ = ["target"]

KEY = b"secret-prefix-\xff-secret-suffix"
OTHER = b"secret-prefix-\xfe-secret-suffix"


def _cli(key: bytes, *args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {k.encode(): v.encode() for k, v in os.environ.items()}
    env[b"PYTHONPATH"] = os.pathsep.join(sys.path).encode()
    env[b"INTERMISSION_AUDIT_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args],
        capture_output=True, cwd=cwd, env=env, timeout=120,
    )  # fmt: skip


def test_a_key_that_is_not_utf8_keys_and_verifies(target: str, tmp_path: Path) -> None:
    store = open_store(target)
    try:
        store.save(paused_change("s"))
    finally:
        store.close()
    refused = _cli(KEY, "approve", "s", "--call", "nope", "--store", target, cwd=tmp_path)
    assert b"Traceback" not in refused.stderr, refused.stderr.decode(errors="replace")
    listed = _cli(KEY, "audit", "s", "--store", target, cwd=tmp_path)
    assert listed.returncode == 0 and b'"keyed": true' in listed.stdout, listed.stderr
    ok = _cli(KEY, "audit", "s", "--verify", "--store", target, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = _cli(OTHER, "audit", "s", "--verify", "--store", target, cwd=tmp_path)
    assert wrong.returncode == 1 and b"no longer matches its MAC" in wrong.stdout
    for out in (ok, wrong, listed, refused):
        assert b"secret-prefix" not in out.stdout + out.stderr
