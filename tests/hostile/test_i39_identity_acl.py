"""Issue 39 (R60), attacked: an identity file the CLI's OS user can write through a POSIX
ACL (``setfacl -m u:me:rw``) while its mode bits say it is root's, 0644.

Before: only the owner and the group/other write bits were looked at, so that user could
map their own login to a person with the approval's role (``os_users: {me: ann}``) and
approve as ``ann``, authenticated. Now the kernel is asked about the very file opened
(``access(/proc/self/fd/N, W_OK)`` with the effective ids): such a file cannot say who
that user is, and the decision is refused with what to configure, the session unchanged.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need
from tests.hitl.test_policy_surfaces import _traversable

from intermission import (
    HITL,
    ApprovalPolicy,
    HITLInterceptor,
    InMemoryAgentSession,
    Principal,
    ReActAgent,
    ScriptedModel,
    ToolCall,
    tool,
)
from intermission.stores import open_store

ROOT = Path(__file__).resolve().parents[2]
USER = "im-a1-acl"


@pytest.fixture
def user() -> Iterator[str]:
    need(os.geteuid() == 0, "makes an OS user: run as root (CI is)")
    need(shutil.which("useradd") is not None and shutil.which("runuser") is not None,
         "useradd and runuser")  # fmt: skip
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", USER], check=True)
    restore = _traversable([os.path.realpath(sys.executable), sys.base_prefix, sys.prefix,
                            str(ROOT)])  # fmt: skip
    try:
        yield USER
    finally:
        for path, mode in reversed(restore):
            os.chmod(path, mode)
        subprocess.run(["userdel", USER], check=False)


def grant_write(path: Path, uid: int) -> None:
    """``setfacl -m u:UID:rw PATH`` without the acl tools: the xattr, written directly."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 6, uid), (0x04, 4, 0xFFFFFFFF),
               (0x10, 6, 0xFFFFFFFF), (0x20, 4, 0xFFFFFFFF)]  # fmt: skip
    data = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", data)
    except OSError as exc:
        need(False, f"POSIX ACLs on {path.parent}: {exc}")


@tool
def pay_invoice(invoice: int) -> str:
    """Pay an invoice (appends to ``$IM_EFFECT_FILE``: what really happened)."""
    with open(os.environ["IM_EFFECT_FILE"], "a") as f:
        f.write(f"paid {invoice}\n")
    return "paid"


def payer() -> Any:
    model = ScriptedModel([[ToolCall("pay_invoice", {"invoice": 7})], "Done."])
    hitl = HITLInterceptor().on_tool("pay_invoice", policy=ApprovalPolicy(roles={"finance"}))
    return ReActAgent.of(model).name("payer").tools(pay_invoice).interceptor(hitl).build()


AGENTS: dict[str, Any] = {"payer": payer}


def test_an_identity_file_writable_through_an_acl_cannot_say_who_its_writer_is(
    user: str,
) -> None:
    where = Path(tempfile.mkdtemp(prefix="im-a1-acl-"))
    try:
        os.chmod(where, 0o777)
        db = where / "s.sqlite"
        effects = where / "effects"
        effects.touch()
        s = InMemoryAgentSession.of("s")
        payer().prompt("pay invoice 7").session(s).principal(Principal("rita")).call()
        store = open_store(f"sqlite:///{db}")
        store.save(s)
        before = store.load("s").to_json()
        store.close()
        for name in os.listdir(where):
            os.chmod(where / name, 0o666)
        auth = where / "identity.json"  # root's, 0644 — and, by an ACL, the user's to write
        auth.write_text(json.dumps({"principals": {"ann": {"roles": ["finance"]}},
                                    "os_users": {user: "ann"}}))  # fmt: skip
        os.chmod(auth, 0o644)
        grant_write(auth, pwd.getpwnam(user).pw_uid)
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
               "HOME": str(where), "IM_EFFECT_FILE": str(effects)}  # fmt: skip
        run = subprocess.run(
            ["runuser", "-u", user, "--", sys.executable, "-m", "intermission", "--agents",
             "tests.hostile.test_i39_identity_acl:AGENTS", "approve", "s",
             "--store", f"sqlite:///{db}", "--auth", str(auth)],
            capture_output=True, text=True, cwd=where, env=env, timeout=180,
        )  # fmt: skip
        assert run.returncode == 2, run.stdout + run.stderr
        assert "can be changed by the OS user" in run.stderr, run.stderr
        store = open_store(f"sqlite:///{db}")
        try:
            after = store.load("s")
            assert HITL.get_decision(after, after.hitl.tasks[0].call_uuid) is None
            assert after.to_json() == before
        finally:
            store.close()
        assert effects.read_text() == ""  # nothing was paid
    finally:
        shutil.rmtree(where, ignore_errors=True)
