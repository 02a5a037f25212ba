"""One person is one principal on every surface (R60), through the real surfaces: a
``serve --auth FILE`` subprocess over HTTP, and the CLI run by other OS users
(``runuser``), on SQLite and PostgreSQL. The tool's own record (a line per run, appended
to ``$IM_EFFECT_FILE`` / ``$AGUI_EFFECTS`` by the process that ran it) says how often it
ran; a refused decision leaves the stored session byte-identical.

- a token named bob votes over AG-UI, then ``intermission approve`` as the OS user bob's
  login maps to: the same person, refused as a second vote; the tool does not run;
- a local OS group named ``sre`` grants nothing: roles come from the identity file only;
- typed names (no ``--auth``) count for no quorum: ``mallory``/``mallory2``,
  ``alice``/``аlice`` (Cyrillic а), ``alice`` + a zero-width space;
- ``not_requester`` with no signed-in requester recorded: it can be rejected, never
  approved, and ``show`` says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import fresh_pg, need_module, pg_dsn
from tests.hitl._policy_agents import deploy_agent
from tests.hitl.test_policy_surfaces import AGENTS, ROLES, os_users, ran

from intermission import InMemoryAgentSession
from intermission.agui.auth import hash_token
from intermission.stores import SQLiteStore, open_store

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"carol": f"carol-{uuid.uuid4().hex}", "bob": f"bob-{uuid.uuid4().hex}"}


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, str]]:
    """OS users im-carol, im-alice, im-bob (each in a local group ``sre``) and im-dan."""
    with os_users() as made:
        yield made


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory every test user may write (the SQLite file, the effects file)."""
    where = Path(tempfile.mkdtemp(prefix="im-one-"))
    os.chmod(where, 0o777)
    (where / "effects").touch()
    os.chmod(where / "effects", 0o666)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, place: Path) -> str:
    if request.param == "postgres":
        need_module("psycopg", "the postgres extra")
        pg_dsn()
        fresh_pg().close()
        return pg_dsn()
    db = place / "store.sqlite"
    SQLiteStore(db).close()
    os.chmod(db, 0o666)
    return str(db)


def identity(place: Path, users: dict[str, str], **changes: Any) -> Path:
    """An identity file: carol, alice, bob (sre) and dan (dev); carol and bob hold tokens;
    the OS users of alice, bob and carol map to them."""
    data: dict[str, Any] = {
        "principals": {n: {"roles": sorted(r)} for n, r in ROLES.items()},
        "tokens": [{"hash": hash_token(t), "name": n} for n, t in TOKENS.items()],
        "os_users": {users[n]: n for n in ("alice", "bob", "carol")},
        **changes,
    }
    path = place / f"identity-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(data))
    os.chmod(path, 0o644)
    return path


def cli(place: Path, user: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m intermission ARGS`` as OS user ``user`` (None: this process's)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
           "IM_EFFECT_FILE": str(place / "effects"), "HOME": str(place)}  # fmt: skip
    env.pop("INTERMISSION_AUTH", None)
    who = ["runuser", "-u", user, "--"] if user else []
    return subprocess.run(
        [*who, sys.executable, "-m", "intermission", "--agents", AGENTS, *args],
        capture_output=True, text=True, cwd=place, env=env, timeout=180, umask=0,
    )  # fmt: skip


def stored(url: str, sid: str) -> str:
    store = open_store(url)
    try:
        return str(store.load(sid).to_json())
    finally:
        store.close()


def ask_as_carol(place: Path, users: dict[str, str], url: str, auth: Path, sid: str) -> None:
    """carol (her OS user, mapped by ``$INTERMISSION_AUTH``) asks to deploy."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
           "HOME": str(place), "INTERMISSION_AUTH": str(auth)}  # fmt: skip
    out = subprocess.run(
        ["runuser", "-u", users["carol"], "--", sys.executable, "-m",
         "tests.hitl._policy_agents", sid, url],
        capture_output=True, text=True, cwd=place, env=env, timeout=180, umask=0,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    store = open_store(url)
    try:
        requester = store.load(sid).requester
    finally:
        store.close()
    assert requester is not None and requester.name == "carol" and requester.authenticated


def test_one_person_signed_in_by_token_then_by_os_user_votes_once(
    users: dict[str, str], place: Path, store_url: str
) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    import httpx
    from tests.agui._server import Server, parse_sse

    auth = identity(place, users)
    old = os.umask(0)  # (the server's SQLite WAL files are written by the CLI's users too)
    try:
        server = Server(store_url, place / "agui-effects", auth=auth, agents=AGENTS,
                        env={"IM_EFFECT_FILE": str(place / "effects")})  # fmt: skip
    finally:
        os.umask(old)
    sid = f"one-{uuid.uuid4().hex[:8]}"
    try:

        def post(who: str, body: dict[str, Any]) -> dict[str, Any]:
            base = {"messages": [], "state": {}, "tools": [], "context": [],
                    "forwardedProps": {}, "threadId": sid}  # fmt: skip
            r = httpx.post(f"{server.url}/agents/deploy", json={**base, **body}, timeout=120,
                           headers={"Authorization": f"Bearer {TOKENS[who]}"})  # fmt: skip
            assert r.status_code == 200, r.text
            return parse_sse(r.text)[-1][1]

        asked = post("carol", {"runId": "r0", "messages": [
            {"id": "u0", "role": "user", "content": "deploy to prod"}]})  # fmt: skip
        (interrupt,) = asked["outcome"]["interrupts"]
        entry = {"interruptId": interrupt["id"], "status": "resolved",
                 "payload": {"approved": True}}  # fmt: skip
        voted = post("bob", {"runId": "r1", "resume": [entry]})
        assert voted["type"] == "RUN_FINISHED" and voted["outcome"]["type"] == "interrupt"
        meta = voted["outcome"]["interrupts"][0]["metadata"]["intermission"]
        assert meta["progress"].startswith("1 of 2 approvals (bob, sre)"), meta

        # bob again, now at the terminal: his login maps to bob, who voted already
        before = stored(store_url, sid)
        again = cli(place, users["bob"], "approve", sid, "--store", store_url, "--auth", str(auth))
        assert again.returncode == 2, again
        assert "the same principal counts once" in again.stderr, again.stderr
        assert stored(store_url, sid) == before
        assert ran(place / "effects", sid) == 0

        # alice is another person: the second approval, and the tool runs once
        second = cli(place, users["alice"], "approve", sid, "--store", store_url,
                     "--auth", str(auth))  # fmt: skip
        assert second.returncode == 0, second.stderr
        assert second.stdout.startswith(f"session {sid} done"), second.stdout
        assert ran(place / "effects", sid) == 1
    finally:
        server.stop()


def test_a_local_group_named_sre_grants_no_role(
    users: dict[str, str], place: Path, store_url: str
) -> None:
    auth = identity(place, users)
    sid = f"grp-{uuid.uuid4().hex[:8]}"
    ask_as_carol(place, users, store_url, auth, sid)
    before = stored(store_url, sid)
    # im-alice is in the local group sre; without an identity file she is im-alice@host,
    # asserted, with no roles
    bare = cli(place, users["alice"], "approve", sid, "--store", store_url)
    assert bare.returncode == 2, bare
    assert "os_users" in bare.stderr and "--auth FILE" in bare.stderr, bare.stderr
    # mapped to a person the file gives no role: the group still grants nothing
    roleless = identity(place, users, principals={"alice": {}, "bob": {"roles": ["sre"]},
                                                 "carol": {"roles": ["sre"]}})  # fmt: skip
    mapped = cli(place, users["alice"], "approve", sid, "--store", store_url,
                 "--auth", str(roleless))  # fmt: skip
    assert mapped.returncode == 2, mapped
    assert "takes one of the roles sre (held: none)" in mapped.stderr, mapped.stderr
    assert stored(store_url, sid) == before
    assert ran(place / "effects", sid) == 0


def test_typed_names_meet_no_quorum_over_agui_without_auth(place: Path, store_url: str) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    from tests.agui._server import Server, effects

    server = Server(store_url, place / "agui-effects")
    sid = f"typed-{uuid.uuid4().hex[:8]}"
    try:
        first = server.run("quorum", {"threadId": sid, "runId": "r0", "messages": [
            {"id": "u0", "role": "user", "content": "delete user 1001"}]})  # fmt: skip
        (interrupt,) = first[-1][1]["outcome"]["interrupts"]
        for i, name in enumerate(["mallory", "mallory2", "alice", "\u0430lice", "alice\u200b"]):
            before = stored(store_url, sid)
            entry = {"interruptId": interrupt["id"], "status": "resolved",
                     "payload": {"approved": True}, "metadata": {"reviewer": name}}  # fmt: skip
            out = server.run("quorum", {"threadId": sid, "runId": f"r{i + 1}",
                                        "resume": [entry]})  # fmt: skip
            last = out[-1][1]
            assert last["type"] == "RUN_ERROR", (name, last)
            assert last["code"] == "REVIEWER_NOT_ALLOWED", (name, last)
            assert "asserted_ok" in last["message"] or "script" in last["message"] or (
                "invisible" in last["message"]
            ), last["message"]
            assert stored(store_url, sid) == before, name
        assert effects(place / "agui-effects", sid) == []
        shown = server.get("/interrupts")["interrupts"]
        progress = [i["interrupt"]["metadata"]["intermission"]["progress"] for i in shown]
        assert progress == ["0 of 2 approvals — waiting for 2 approvals from anyone"], progress
    finally:
        server.stop()


def test_not_requester_without_a_signed_in_requester_is_never_approved(
    place: Path, store_url: str
) -> None:
    from intermission.principals import os_login

    sid = f"noreq-{uuid.uuid4().hex[:8]}"
    s = InMemoryAgentSession.of(sid)
    deploy_agent().prompt("deploy to prod").session(s).call()  # (no .principal(): nobody)
    store = open_store(store_url)
    try:
        store.save(s)
    finally:
        store.close()
    auth = place / "me.json"
    auth.write_text(json.dumps({"principals": {"alice": {"roles": ["sre"]}},
                                "os_users": {os_login(): "alice"}}))  # fmt: skip
    why = "no signed-in requester was recorded: it can be rejected or expire, not approved"
    shown = cli(place, None, "show", sid, "--store", store_url)
    assert shown.returncode == 0 and why in shown.stdout, shown
    before = stored(store_url, sid)
    approve = cli(place, None, "approve", sid, "--store", store_url, "--auth", str(auth))
    assert approve.returncode == 2 and why in approve.stderr, approve
    assert stored(store_url, sid) == before
    assert ran(place / "effects", sid) == 0
    reject = cli(place, None, "reject", sid, "--reason", "who asked?", "--store", store_url,
                 "--auth", str(auth))  # fmt: skip
    assert reject.returncode == 0, reject.stderr
    assert reject.stdout.startswith(f"session {sid} done"), reject.stdout
    assert ran(place / "effects", sid) == 0


def test_a_thread_started_without_auth_is_never_approved_on_a_server_with_it(
    users: dict[str, str], place: Path, store_url: str
) -> None:
    need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
    import httpx
    from tests.agui._server import Server, parse_sse

    sid = f"open-{uuid.uuid4().hex[:8]}"
    env = {"IM_EFFECT_FILE": str(place / "effects")}
    open_server = Server(store_url, place / "agui-effects", agents=AGENTS, env=env)
    try:  # asked on a server without auth: nobody signed in asked
        asked = open_server.run("deploy", {"threadId": sid, "runId": "r0", "messages": [
            {"id": "u0", "role": "user", "content": "deploy to prod"}]})  # fmt: skip
    finally:
        open_server.stop()
    (interrupt,) = asked[-1][1]["outcome"]["interrupts"]
    signed = Server(store_url, place / "agui-effects", auth=identity(place, users),
                    agents=AGENTS, env=env)  # fmt: skip
    try:
        r = httpx.get(f"{signed.url}/interrupts", timeout=60,
                      headers={"Authorization": f"Bearer {TOKENS['bob']}"})  # fmt: skip
        (item,) = r.json()["interrupts"]
        why = "no signed-in requester was recorded: it can be rejected or expire, not approved"
        meta = item["interrupt"]["metadata"]["intermission"]
        assert meta["notApprovable"] == why and why in meta["progress"], meta
        before = stored(store_url, sid)
        entry = {"interruptId": interrupt["id"], "status": "resolved",
                 "payload": {"approved": True}}  # fmt: skip
        body = {"threadId": sid, "runId": "r1", "resume": [entry], "messages": [], "state": {},
                "tools": [], "context": [], "forwardedProps": {}}  # fmt: skip
        r = httpx.post(f"{signed.url}/agents/deploy", json=body, timeout=120,
                       headers={"Authorization": f"Bearer {TOKENS['bob']}"})  # fmt: skip
        last = parse_sse(r.text)[-1][1]
        assert last["type"] == "RUN_ERROR" and last["code"] == "REVIEWER_NOT_ALLOWED", last
        assert "no signed-in requester" in last["message"], last
        assert stored(store_url, sid) == before
        assert ran(place / "effects", sid) == 0
    finally:
        signed.stop()


def test_an_identity_file_the_os_user_can_change_vouches_for_nobody(
    users: dict[str, str], place: Path, store_url: str
) -> None:
    auth = identity(place, users)
    sid = f"own-{uuid.uuid4().hex[:8]}"
    ask_as_carol(place, users, store_url, auth, sid)
    before = stored(store_url, sid)
    # dan (dev) writes his own file mapping his login to alice (sre): refused, not alice
    forged = identity(place, users, os_users={users["dan"]: "alice"})
    shutil.chown(forged, user=users["dan"])
    out = cli(place, users["dan"], "approve", sid, "--store", store_url, "--auth", str(forged))
    assert out.returncode == 2, out
    assert "cannot say who" in out.stderr and "chown root" in out.stderr, out.stderr
    os.chmod(forged, 0o666)  # (owned by root but writable by everyone: the same)
    shutil.chown(forged, user="root")
    out = cli(place, users["dan"], "approve", sid, "--store", store_url, "--auth", str(forged))
    assert out.returncode == 2 and "cannot say who" in out.stderr, out
    assert stored(store_url, sid) == before
    assert ran(place / "effects", sid) == 0
