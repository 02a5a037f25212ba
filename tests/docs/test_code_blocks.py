"""The README and every page of the docs are tests (issues 29 and 43): the wheel built from
this checkout is installed into a fresh virtual environment outside the repository, and every
code block of each document runs there, top to bottom, in a working folder of its own — each
``python`` block as a script, each ``bash`` block as a shell script with that environment
active — as a reader would. (The public docstrings' examples run in
``test_public_docstrings.py``; the tutorials under nbval.)

What differs from a reader's machine, and why:

- ``pip install intermission[...]`` installs this checkout's wheel (with the same extras)
  instead of the index's release;
- ``make …`` lines are skipped: they need a clone (its Makefile and tutorials), not an
  install;
- the server's port 8000 is swapped for a free one (tests run side by side);
- ``ops_server.py``, the MCP server the README's MCP block starts, is the tests' own
  (``tests/mcp_ops_server.py``), as the README says.

A ``# -> TEXT`` comment on a line is a promise: the block's output must contain TEXT (the
role pytest-examples gives ``#>`` lines; ours sits on the line it speaks of, so a block
reads as a terminal session).

A block that cannot run here says so in its fence and why: ```` ```python title="not run:
WHY" ```` (the site shows WHY above the block); this test checks that a reason is given.

Blocks that are not scripts are checked against the installed package instead of run:

- a ``text`` block is a synopsis of command lines with placeholders (``ID``, ``[--failed]``):
  every line is ``python -m intermission COMMAND …``, and each command and option it names
  is one the CLI has;
- a ``yaml`` block is a notification config: the package reads it into its targets (its
  ``…_env`` variables set to stand-ins), as ``notify --config`` would — or, when it holds
  ``tokens``/``jwt``, an auth file: the package reads it as ``serve --auth`` would (its
  ``key_file`` a stand-in public key);
- a ``json`` block is a webhook's body: it parses, and its fields are those of a body the
  package builds for a real pause.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from tests._venv import ROOT, built_wheel, fresh_venv, pip_install, user_env

README = ROOT / "README.md"
DOCUMENTS = [README, *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]
BLOCK = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.M | re.S)
NOT_RUN = re.compile(r'title="not run: ([^"]{12,})"')
INDENTED = re.compile(r"\n\n(?: {4}|\t)\S.*")
PROMISE = re.compile(r"#\s*->\s*(.+?)\s*$", re.M)
PIP_NAME = re.compile(r"""(["']?)intermission(\[[^\]]*\])?\1(?=\s|$)""")
SKIPPED = "skipped: `make` targets need a clone of the repository, not an installed wheel"



def blocks(document: Path = README) -> list[tuple[str, str, int]]:
    """``(language, code, line)`` of every fenced block of a document that runs (a block whose
    fence says "not run: WHY" does not)."""
    text = document.read_text()
    found = []
    for m in BLOCK.finditer(text):
        info = m.group(2).strip()
        if info and not NOT_RUN.search(info):
            raise AssertionError(f"{document.name}: a fence says {info!r}; the only option "
                                 'this test knows is title="not run: WHY"')  # fmt: skip
        if not info:
            found.append((m.group(1), m.group(3), text[: m.start()].count("\n") + 1))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shell_script(code: str, wheel: Path, port: int) -> tuple[str, list[str]]:
    """The bash block as this test runs it, and the lines it skipped."""
    lines, skipped = [], []
    for line in code.splitlines():
        if line.startswith("make "):
            skipped.append(line)
            lines.append(f": '{SKIPPED}: {line}'")
            continue
        if line.startswith("pip install "):
            line = PIP_NAME.sub(lambda m: f'"{wheel}{m.group(2) or ""}"', line)
        lines.append(line.replace("8000", str(port)))
    prelude = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
    return prelude + "\n".join(lines) + "\n", skipped


SYNOPSIS = r"""
import json, shlex, sys
from intermission.cli import build_parser

parser = build_parser()
sub = next(a for a in parser._actions if a.dest == "command")
top = {o for a in parser._actions for o in a.option_strings}
wrong = []
for line in json.load(sys.stdin):
    words = shlex.split(line, comments=True)
    if words[:3] != ["python", "-m", "intermission"] or len(words) < 4:
        wrong.append(f"not a `python -m intermission COMMAND` line: {line}")
        continue
    command = sub.choices.get(words[3])
    if command is None:
        wrong.append(f"no command {words[3]!r}: {line}")
        continue
    known = top | {o for a in command._actions for o in a.option_strings}
    for word in words[4:]:
        option = word.strip("[]").split("=")[0]
        if option.startswith("--") and option not in known:
            wrong.append(f"{words[3]} has no option {option}: {line}")
print(json.dumps(wrong))
"""

CONFIG = r"""
import os, re, sys
from intermission.notify.config import load_config, targets_of

text = open(sys.argv[1]).read()
for name in re.findall(r"_env:\s*(\w+)", text):  # stand-ins: a URL serves as a secret too
    os.environ[name] = "https://hooks.example.com/services/0123456789abcdef"
print(len(targets_of(load_config(sys.argv[1]))))
"""

AUTH = r"""
import re, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from intermission.agui.auth import load_auth

text = open(sys.argv[1]).read()
for name in re.findall(r"key_file:\s*(\S+)", text):  # a stand-in public key
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    pem = key.public_bytes(serialization.Encoding.PEM, spki)
    open(name, "wb").write(pem)
print(type(load_auth(sys.argv[1])).__name__)
"""

BODY = r"""
import json
from intermission import InMemoryAgentSession
from intermission.examples import build_ops_agent
from intermission.notify.notification import Notification
from intermission.stores import MemoryStore

store = MemoryStore(outbox=True)
s = InMemoryAgentSession.of("ticket-42")
build_ops_agent().prompt("Please delete user 1001").session(s).call()
store.save(s)
(row,) = store.outbox.rows()
body = Notification.of(row, "https://review.example.com").body()
print(json.dumps(body))
"""


def shape(body: dict[str, object]) -> dict[str, list[str]]:
    """A webhook body's field names: its own, its session's, its first interrupt's."""
    interrupts = body.get("interrupts") or [{}]
    assert isinstance(interrupts, list) and isinstance(body.get("session"), dict)
    return {
        "body": sorted(body),
        "session": sorted(body["session"]),  # type: ignore[arg-type]
        "interrupt": sorted(interrupts[0]),
    }


def check(lang: str, code: str, n: int, bin_dir: Path, work: Path, env: dict[str, str]) -> str:
    """A block that is not a script, checked against the installed package (module doc);
    returns what went wrong, or ''."""
    python = str(bin_dir / "python")
    if lang == "text":
        lines = [line for line in code.splitlines() if line.strip()]
        done = subprocess.run([python, "-c", SYNOPSIS], input=json.dumps(lines), cwd=work,
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        if done.returncode != 0:
            return done.stderr[-4000:]
        return "\n".join(json.loads(done.stdout))
    if lang == "yaml":
        path = work / f"readme_block_{n}.yaml"
        path.write_text(code)
        if re.search(r"^(tokens|jwt):", code, re.M):  # an auth file
            done = subprocess.run([python, "-c", AUTH, path.name], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
            return done.stderr[-4000:] if done.returncode != 0 else ""
        done = subprocess.run([python, "-c", CONFIG, path.name], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if done.returncode != 0:
            return done.stderr[-4000:]
        listed = len(re.findall(r"^\s*- type:", code, re.M))
        return "" if done.stdout.strip() == str(listed) else f"targets: {done.stdout}"
    readme_body = json.loads(code)
    done = subprocess.run([python, "-c", BODY], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    if done.returncode != 0:
        return done.stderr[-4000:]
    real = shape(json.loads(done.stdout))
    return "" if shape(readme_body) == real else f"the package sends {real}"


def _where(document: Path) -> str:
    return str(document.relative_to(ROOT))


def test_every_block_is_run_or_checked_and_none_is_hidden() -> None:
    found = [(doc, *block) for doc in DOCUMENTS for block in blocks(doc)]
    for doc in DOCUMENTS:
        prose = BLOCK.sub("", doc.read_text())
        assert not INDENTED.findall(prose), (
            f"{_where(doc)}: an indented code block: fence it, so it is run or checked"
        )
    langs = {lang for _, lang, _, _ in found}
    assert langs <= {"python", "py", "bash", "text", "yaml", "json"}, "a block no test runs"
    assert sum(lang == "python" for _, lang, _, _ in found) >= 10
    assert any("curl" in code for _, lang, code, _ in found if lang == "bash")
    assert shutil.which("curl"), "the docs' AG-UI session needs curl (apt-get install curl)"
    assert len(blocks(README)) >= 3  # the landing page's own: install, fifteen lines, the CLI


# Every extra a page tells its reader to install: the pages run in one environment (a fresh
# one each would cost minutes), so each has what any page installs, whatever the order.
EXTRAS = "notebook,marimo,agui,notify,otel,mcp,pydantic-ai"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("docs-venv")
    wheel = built_wheel()
    bin_dir = fresh_venv(where / "venv")
    pip_install(bin_dir, f"{wheel}[{EXTRAS}]")
    # the blocks run against the wheel in that environment, not this checkout
    located = subprocess.run(
        [str(bin_dir / "python"), "-c", "import intermission; print(intermission.__file__)"],
        cwd=where, env=user_env(bin_dir), capture_output=True, text=True, timeout=60,
        check=True,
    )  # fmt: skip
    assert str(where / "venv") in located.stdout and str(ROOT) not in located.stdout
    return wheel, bin_dir


HOME = ROOT / "docs" / "index.md"


def test_the_home_page_holds_the_readmes_blocks() -> None:
    """docs/index.md is the README with links into the site: the same blocks, so they run
    once (as the README's)."""
    home = [(lang, code) for lang, code, _ in blocks(HOME)]
    assert home and home == [(lang, code) for lang, code, _ in blocks(README)]


@pytest.mark.parametrize("document", [d for d in DOCUMENTS if blocks(d) and d != HOME], ids=_where)
def test_every_block_of_a_document_runs_against_the_wheel_in_a_fresh_environment(
    document: Path, installed: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, bin_dir = installed
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "tests" / "mcp_ops_server.py", work / "ops_server.py")
    env = user_env(bin_dir)
    skipped: list[str] = []
    timings = []
    for n, (lang, code, line) in enumerate(blocks(document)):
        where = f"{_where(document)} line {line} ({lang})"
        started = time.monotonic()
        if lang in ("text", "yaml", "json"):
            wrong = check(lang, code, n, bin_dir, work, env)
            assert not wrong, f"{where} is not true of the package:\n{wrong}"
            continue
        if lang in ("python", "py"):
            script = work / f"block_{n}.py"
            script.write_text(code)
            cmd = [str(bin_dir / "python"), script.name]
        else:
            text, skipped_here = shell_script(code, wheel, _free_port())
            skipped += skipped_here
            cmd = ["bash", "-c", text]
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        timings.append(f"{where}: {time.monotonic() - started:.1f} s")
        assert done.returncode == 0, (
            f"{where} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
        for promise in PROMISE.findall(code):
            assert promise in done.stdout, f"{where}: no {promise!r} in:\n{done.stdout[-4000:]}"
    print("\n".join(timings))
    assert all(line.startswith("make ") for line in skipped)
