"""One rule on every surface: the same approval policy (two approvals from distinct sre
principals, never the one who asked) refuses and accepts the same decisions whether they
come through the Python API, the CLI (two OS users, ``runuser``), the AG-UI server (two
tokens and a JWT signed by a test key), the console's way into it, or the notebook widgets.

Each case is a script of decisions by carol (sre, who asks), alice and bob (sre) and dan
(dev). After a refusal the stored session is exactly as it was and nothing ran; the tool's
own record (a line per run in a file it appends to) says how often it ran."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need, need_module
from tests.hitl._policy_agents import deploy_agent

from intermission import (
    HITL,
    DecisionRefusedError,
    HITLDecision,
    InMemoryAgentSession,
    IntermissionError,
    Principal,
)
from intermission.stores import MemoryStore, SQLiteStore, decide_and_resume

ROOT = Path(__file__).resolve().parents[2]
AGENTS = "tests.hitl._policy_agents:AGENTS"
ROLES = {"carol": {"sre"}, "alice": {"sre"}, "bob": {"sre"}, "dan": {"dev"}}
PRINCIPALS = {name: Principal(name, roles) for name, roles in ROLES.items()}

# What each refusal says, on every surface (the CLI and AG-UI send the error's text)
SAYS = {
    "roles": "takes one of the roles",
    "not_requester": "someone else must",
    "twice": "the same principal counts once",
    "reason_to_reject": "needs a reason",
}


@dataclass(frozen=True)
class Step:
    who: str
    verdict: str  # approve | reject
    reason: str | None
    expect: str  # waiting | done | refused:<rule>


CASES: dict[str, tuple[list[Step], int]] = {
    # name: (the decisions in order, how often the tool ran at the end)
    "another role is refused": ([Step("dan", "approve", None, "refused:roles")], 0),
    "the requester is refused": ([Step("carol", "approve", None, "refused:not_requester")], 0),
    "the same principal counts once": (
        [
            Step("alice", "approve", None, "waiting"),
            Step("alice", "approve", None, "refused:twice"),
        ],
        0,
    ),
    "a rejection needs a reason": (
        [Step("bob", "reject", None, "refused:reason_to_reject")],
        0,
    ),
    "two approvals run the tool once": (
        [Step("alice", "approve", None, "waiting"), Step("bob", "approve", None, "done")],
        1,
    ),
    "a rejection rejects": (
        [Step("alice", "approve", None, "waiting"), Step("bob", "reject", "too risky", "done")],
        0,
    ),
}


def ran(effects: Path, sid: str) -> int:
    """How often ``deploy`` ran for ``sid``, from the tool's own record."""
    if not effects.exists():
        return 0
    return sum(1 for line in effects.read_text().splitlines() if line.split(" ")[0] == sid)


def rule_of(text: str) -> str:
    found = [rule for rule, words in SAYS.items() if words in text]
    assert len(found) == 1, text
    return found[0]


class Surface:
    """A way to ask and decide; subclasses say how."""

    name = "?"
    effects: Path

    def start(self, sid: str) -> None:
        raise NotImplementedError

    def decide(self, sid: str, step: Step) -> str:
        """``waiting``, ``done`` or ``refused:<rule>``."""
        raise NotImplementedError

    def stored(self, sid: str) -> str:
        raise NotImplementedError

    def progress(self, sid: str) -> str | None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class API(Surface):
    """The Python API: a store, ``decide_and_resume(..., principal=)``."""

    name = "api"

    def __init__(self, effects: Path) -> None:
        self.store = MemoryStore()
        self.effects = effects

    def start(self, sid: str) -> None:
        s = InMemoryAgentSession.of(sid)
        deploy_agent().prompt("deploy to prod").session(s).principal(PRINCIPALS["carol"]).call()
        self.store.save(s)

    def decide(self, sid: str, step: Step) -> str:
        (task,) = self.store.load(sid).hitl.tasks
        d = (
            HITLDecision.approve()
            if step.verdict == "approve"
            else HITLDecision.reject(step.reason)
        )
        try:
            out = decide_and_resume(
                self.store, sid, lambda s: HITL.submit(s, task.call_uuid, d), deploy_agent(),
                principal=PRINCIPALS[step.who],
            )  # fmt: skip
        except DecisionRefusedError as exc:
            assert exc.reviewer == step.who and exc.verdict == step.verdict
            return f"refused:{exc.rule}"
        return "waiting" if out.waiting is not None else "done"

    def stored(self, sid: str) -> str:
        return self.store.load(sid).to_json()

    def progress(self, sid: str) -> str | None:
        s = self.store.load(sid)
        found = HITL.progress(s, s.hitl.tasks[0].call_uuid)
        return None if found is None else found.text


class Widgets(Surface):
    """The notebook: an HITLPanel per person on one store (the code twins), each person's
    kernel signed in by an identity map that maps its OS user to them (R60: a typed name
    alone counts for no policy that counts people)."""

    name = "widgets"

    def __init__(self, effects: Path) -> None:
        need_module("anywidget", "the notebook extra (pip install 'intermission[notebook]')")
        self.store = SQLiteStore(effects.with_name("widgets.db"))
        self.effects = effects

    def start(self, sid: str) -> None:
        s = InMemoryAgentSession.of(sid)
        deploy_agent().prompt("deploy to prod").session(s).principal(PRINCIPALS["carol"]).call()
        self.store.save(s)

    def decide(self, sid: str, step: Step) -> str:
        from intermission import IdentityMap
        from intermission.notebook import HITLPanel, settings
        from intermission.principals import os_login

        panel = HITLPanel(deploy_agent(), self.store.load(sid), store=self.store,
                          principal=PRINCIPALS[step.who])  # fmt: skip
        assert panel.reviewer == step.who
        (uuid_,) = panel.rows
        settings.identity = IdentityMap(PRINCIPALS, os_users={os_login(): step.who})
        try:
            if step.verdict == "approve":
                response = panel.approve(uuid_)
            else:
                response = panel.reject(uuid_, step.reason or "")
        except IntermissionError as exc:
            return f"refused:{getattr(exc, 'rule', None) or rule_of(str(exc))}"
        finally:
            settings.identity = None
            panel.close()
        if response is None:
            assert panel.runner.note.startswith("recorded; 1 of 2 approvals"), panel.runner.note
            return "waiting"
        return "done"

    def stored(self, sid: str) -> str:
        return self.store.load(sid).to_json()

    def progress(self, sid: str) -> str | None:
        from intermission.notebook import HITLPanel

        # another person's view of it: the panel says what it has and needs
        panel = HITLPanel(deploy_agent(), self.store.load(sid), store=self.store,
                          principal=PRINCIPALS["bob"])  # fmt: skip
        try:
            (row,) = panel.calls
            assert row["open"], row  # open for bob to decide
            return panel.progress
        finally:
            panel.close()

    def close(self) -> None:
        self.store.close()


ISSUER, AUDIENCE = "https://login.test/", "intermission-tests"


class AGUI(Surface):
    """The AG-UI server: carol, alice and dan hold tokens, bob signs in with a JWT; the
    console variant says so in its resume (``metadata.via``), as the console page does."""

    def __init__(self, effects: Path, via: str = "agui") -> None:
        need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
        need_module("jwt", "PyJWT (pip install 'intermission[agui]')")
        import jwt
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from starlette.testclient import TestClient

        from intermission.agui import agui_app
        from intermission.agui.auth import AnyAuth, JWTAuth, TokenAuth

        self.name = via
        self.via = via
        self.effects = effects
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        tokens = {f"token-{n}-{uuid.uuid4().hex}": PRINCIPALS[n] for n in ("carol", "alice", "dan")}
        claims = {"sub": "bob", "roles": ["sre"], "iss": ISSUER, "aud": AUDIENCE,
                  "exp": int(time.time()) + 3600}  # fmt: skip
        self.bearer = {p.name: t for t, p in tokens.items()}
        self.bearer["bob"] = jwt.encode(claims, key, algorithm="RS256")
        auth = AnyAuth([TokenAuth(tokens), JWTAuth(issuer=ISSUER, audience=AUDIENCE, key=pem)])
        self.store = MemoryStore()
        self.started: list[str] = []
        app = agui_app({"deploy": deploy_agent}, self.store, auth=auth)
        self.client = TestClient(app, base_url="http://127.0.0.1")

    def post(self, who: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        from tests.agui._server import parse_sse

        base = {"messages": [], "state": {}, "tools": [], "context": [], "forwardedProps": {}}
        r = self.client.post("/agents/deploy", json={**base, **body},
                             headers={"Authorization": f"Bearer {self.bearer[who]}"})  # fmt: skip
        assert r.status_code == 200, r.text
        return [e for _, e in parse_sse(r.text)]

    def start(self, sid: str) -> None:
        self.started.append(sid)
        events = self.post("carol", {"threadId": sid, "runId": "r0", "messages": [
            {"id": "u0", "role": "user", "content": "deploy to prod"}]})  # fmt: skip
        assert events[-1]["outcome"]["type"] == "interrupt"

    def decide(self, sid: str, step: Step) -> str:
        (iid,) = [t.call_uuid for t in self.store.load(sid).hitl.tasks]
        payload: dict[str, Any] = {"approved": step.verdict == "approve"}
        if step.reason is not None:
            payload["reason"] = step.reason
        entry = {"interruptId": iid, "status": "resolved", "payload": payload,
                 "metadata": {"via": self.via, "reviewer": "typed-name"}}  # fmt: skip
        events = self.post(step.who, {"threadId": sid, "runId": f"r-{uuid.uuid4().hex[:8]}",
                                      "resume": [entry]})  # fmt: skip
        last = events[-1]
        if last["type"] == "RUN_ERROR":
            assert last["code"] in ("REVIEWER_NOT_ALLOWED", "DECISION_REFUSED", "INVALID_PAYLOAD")
            return f"refused:{rule_of(last['message'])}"
        assert last["type"] == "RUN_FINISHED", last
        if last["outcome"]["type"] == "interrupt":  # the same interrupt, still open
            (still,) = last["outcome"]["interrupts"]
            assert still["id"] == iid
            meta = still["metadata"]["intermission"]
            assert [a["name"] for a in meta["approvals"]] == [step.who]
            assert meta["progress"].startswith(f"1 of 2 approvals ({step.who}, sre)")
            return "waiting"
        return "done"

    def stored(self, sid: str) -> str:
        return self.store.load(sid).to_json()

    def progress(self, sid: str) -> str | None:
        r = self.client.get(
            "/interrupts", headers={"Authorization": f"Bearer {self.bearer['dan']}"}
        )
        assert r.status_code == 200, r.text
        (item,) = r.json()["interrupts"]
        text: str = item["interrupt"]["metadata"]["intermission"]["progress"]
        return text


# -- the CLI as two (four) OS users ---------------------------------------------------


def _traversable(paths: list[str]) -> list[tuple[str, int]]:
    """Let other users reach ``paths`` (o+x on each ancestor that lacks it, e.g. /root
    holding a pyenv Python); returns what to restore."""
    changed = []
    for path in paths:
        for parent in [*reversed(Path(path).resolve().parents)]:
            mode = os.stat(parent).st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(parent, mode | stat.S_IXOTH)
                changed.append((str(parent), mode))
    return changed


@contextlib.contextmanager
def os_users() -> Iterator[dict[str, str]]:
    """OS users im-carol, im-alice, im-bob (group sre) and im-dan (group dev), made for
    the test and removed after it."""
    need(os.geteuid() == 0, "the CLI surface makes OS users: run as root (CI is)")
    need(shutil.which("useradd") is not None and shutil.which("runuser") is not None,
         "useradd and runuser (util-linux, passwd)")  # fmt: skip
    made: list[str] = []
    groups: list[str] = []
    for group in ("sre", "dev"):
        try:
            grp.getgrnam(group)
        except KeyError:
            subprocess.run(["groupadd", group], check=True)
            groups.append(group)
    names = {}
    for name, roles in ROLES.items():
        user = f"im-{name}"
        names[name] = user
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", "-G", ",".join(roles),
                            user], check=True)  # fmt: skip
            made.append(user)
        else:  # left by a run that was killed: its groups may be gone, and made again here
            subprocess.run(["usermod", "-G", ",".join(roles), user], check=True)
    restore = _traversable([os.path.realpath(sys.executable), sys.base_prefix, sys.prefix,
                            str(ROOT)])  # fmt: skip
    try:
        yield names
    finally:
        for path, mode in reversed(restore):
            os.chmod(path, mode)
        for user in made:
            subprocess.run(["userdel", user], check=False)
        for group in groups:
            subprocess.run(["groupdel", group], check=False)


def identity_file(where: Path, users: dict[str, str]) -> Path:
    """An identity file declaring the people of ROLES and mapping each one's OS user to
    them (R60: the CLI's roles come from it, never from OS groups)."""
    import json

    path = where / "identity.json"
    path.write_text(json.dumps({
        "principals": {n: {"roles": sorted(r)} for n, r in ROLES.items()},
        "os_users": {users[n]: n for n in ROLES},
    }))  # fmt: skip
    os.chmod(path, 0o644)
    return path


class CLI(Surface):
    """``python -m intermission approve|reject`` run by each person's own OS user, mapped
    to them by an identity file (``$INTERMISSION_AUTH`` to ask, ``--auth`` to decide)."""

    name = "cli"

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.dir = Path(tempfile.mkdtemp(prefix="im-cli-"))
        os.chmod(self.dir, 0o777)  # (every user writes the SQLite file and its WAL)
        self.db = self.dir / "cli.sqlite"
        self.effects = self.dir / "effects"
        self.effects.touch(mode=0o666)
        os.chmod(self.effects, 0o666)
        SQLiteStore(self.db).close()
        os.chmod(self.db, 0o666)
        self.host = os.uname().nodename
        self.identity = identity_file(self.dir, users)

    def run(self, who: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
               "IM_EFFECT_FILE": str(self.effects),
               "HOME": str(self.dir)}  # fmt: skip
        if args[:2] == ("-m", "tests.hitl._policy_agents"):
            env["INTERMISSION_AUTH"] = str(self.identity)
        return subprocess.run(
            ["runuser", "-u", self.users[who], "--", sys.executable, *args],
            capture_output=True, text=True, cwd=self.dir, env=env, timeout=180, umask=0,
        )  # fmt: skip

    def start(self, sid: str) -> None:
        out = self.run("carol", "-m", "tests.hitl._policy_agents", sid, str(self.db))
        assert out.returncode == 0, out.stderr
        s = self.load(sid)
        assert s.requester is not None and s.requester.name == "carol"
        assert s.requester.via == "cli" and s.requester.authenticated

    def load(self, sid: str) -> Any:
        store = SQLiteStore(self.db)
        try:
            return store.load(sid)
        finally:
            store.close()

    def decide(self, sid: str, step: Step) -> str:
        verb = ["approve"] if step.verdict == "approve" else ["reject", "--reason",
                                                               step.reason or ""]  # fmt: skip
        out = self.run(step.who, "-m", "intermission", "--agents", AGENTS, *verb, sid,
                       "--reviewer", f"{step.who} typed this", "--store", str(self.db),
                       "--auth", str(self.identity))  # fmt: skip
        if out.returncode == 2:
            assert out.stderr.startswith("error: ") and out.stdout == "", out
            return f"refused:{rule_of(out.stderr)}"
        assert out.returncode == 0, out.stderr
        if "recorded; 1 of 2 approvals" in out.stdout:
            assert f"({step.who}, sre)" in out.stdout, out.stdout
            return "waiting"
        assert out.stdout.startswith(f"session {sid} done"), out.stdout
        return "done"

    def stored(self, sid: str) -> str:
        return str(self.load(sid).to_json())

    def progress(self, sid: str) -> str | None:
        out = self.run("dan", "-m", "intermission", "show", sid, "--store", str(self.db))
        assert out.returncode == 0, out.stderr
        needs = [line for line in out.stdout.splitlines() if line.startswith("needs:")]
        return needs[0] if needs else None

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


# -- the table ------------------------------------------------------------------------


def play(surface: Surface, case: str) -> None:
    steps, runs = CASES[case]
    sid = f"{surface.name}-{uuid.uuid4().hex[:8]}"
    surface.start(sid)
    for step in steps:
        before = surface.stored(sid)
        got = surface.decide(sid, step)
        assert got == step.expect, (surface.name, case, step)
        if got.startswith("refused"):
            assert surface.stored(sid) == before, "a refused decision changed the session"
        if got == "waiting":
            shown = surface.progress(sid)
            assert shown is not None and "1 of 2 approvals" in shown, shown
            assert "waiting for one more from sre" in shown, shown
        assert ran(surface.effects, sid) == (runs if got == "done" else 0)
    assert ran(surface.effects, sid) == runs


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file ``deploy`` appends a line to each time it runs (in this process)."""
    path = tmp_path / "effects"
    monkeypatch.setenv("IM_EFFECT_FILE", str(path))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_the_python_api(case: str, effects: Path) -> None:
    play(API(effects), case)


@pytest.mark.parametrize("case", list(CASES))
def test_the_notebook_widgets(case: str, effects: Path) -> None:
    surface = Widgets(effects)
    try:
        play(surface, case)
    finally:
        surface.close()


@pytest.mark.parametrize("via", ["agui", "console"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_agui_server_and_console(case: str, via: str, effects: Path) -> None:
    surface = AGUI(effects, via)
    play(surface, case)
    if case == "two approvals run the tool once":  # who decided, as the server knew them
        (sid,) = surface.started
        (done,) = [e for e in surface.store.load(sid).events if e.kind == "hitl_decided"]
        record = done.decision
        assert [(v.name, v.via, v.authenticated, v.display) for v in record.votes] == [
            ("alice", via, True, "typed-name"),
            ("bob", via, True, "typed-name"),
        ]  # a client-sent reviewer name is a display note, never the identity


@pytest.fixture(scope="module")
def cli_users() -> Iterator[dict[str, str]]:
    with os_users() as users:
        yield users


@pytest.mark.parametrize("case", list(CASES))
def test_the_cli_as_os_users(case: str, cli_users: dict[str, str]) -> None:
    surface = CLI(cli_users)
    try:
        play(surface, case)
    finally:
        surface.close()


def test_the_cli_records_the_os_user_not_the_typed_name(cli_users: dict[str, str]) -> None:
    surface = CLI(cli_users)
    try:
        sid = "cli-who"
        surface.start(sid)
        assert surface.decide(sid, Step("alice", "approve", None, "waiting")) == "waiting"
        assert surface.decide(sid, Step("bob", "approve", None, "done")) == "done"
        (done,) = [e for e in surface.load(sid).events if e.kind == "hitl_decided"]
        record = done.decision
        assert record.reviewer == "bob" and record.via == "cli"
        assert record.authenticated and "sre" in record.roles
        assert record.display == "bob typed this"
        assert [v.name for v in record.votes] == ["alice", "bob"]
    finally:
        surface.close()
