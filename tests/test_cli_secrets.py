"""A store URL's password is never printed (issue 39): not by argparse's usage errors, not by
a connection error (libpq's own words included), not in the commands to paste that the CLI
prints; ``INTERMISSION_STORE`` keeps the URL out of argv. :func:`mask_url` is the one
masker: no password of a URL, a ``?password=`` or a libpq keyword string survives it, and
text without one comes back unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from tests._helpers import PG_SECRET, pg_role_url

from intermission._cli_parser import store_option
from intermission._secrets import (
    MASK,
    mask_known,
    mask_options,
    mask_url,
    passwords_in,
    read_token,
)

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "intermission", *args], capture_output=True, text=True,
        cwd=ROOT, timeout=90,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **(env or {})},
    )  # fmt: skip


def refused(done: subprocess.CompletedProcess[str], secret: str = PG_SECRET) -> str:
    """The one error line of a refused command, which names no secret."""
    assert done.returncode == 2, done
    assert secret not in done.stdout + done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


URL = f"postgresql://ann:{PG_SECRET}@127.0.0.1:1/app"


@pytest.mark.parametrize(
    "argv",
    [(URL, "pending"), ("--store", URL, "pending"), ("pending", URL),
     ("pending", "--store", URL, "--limit", "x"), ("show", "--store", URL),
     ("audit", "s1", "--format", "xml", "--store", URL)],
)  # fmt: skip
def test_usage_errors_mask_the_store_password(argv: tuple[str, ...]) -> None:
    line = refused(cli(*argv))
    assert line.startswith(("intermission: error: ", "intermission ")), line
    if "postgresql://" in line:
        assert "postgresql://ann:***@127.0.0.1:1/app" in line, line


def test_connection_errors_mask_the_password_libpq_quotes() -> None:
    # a port nobody listens on, a host that does not resolve, a URL libpq cannot read
    # (it quotes the URL back, password and all), raw / @ or space in the password
    for url, says in (
        (URL, "cannot connect to the PostgreSQL store"),
        (f"postgresql://ann:{PG_SECRET}@nohost.invalid/app", "cannot connect"),
        (f"postgresql://ann:{PG_SECRET}@[::1/app", "the PostgreSQL URL cannot be read"),
        (f"postgresql://ann:{PG_SECRET}@127.0.0.1:notaport/app", "refused the connection"),
        (f"postgresql://ann:p@{PG_SECRET}@nohost.invalid/app", "cannot connect"),
        (f"postgresql://ann:x {PG_SECRET}@127.0.0.1/app", "the PostgreSQL URL cannot be read"),
        (f"postgresql://127.0.0.1:1/app?user=ann&password={PG_SECRET}", "cannot connect"),
    ):
        line = refused(cli("pending", "--store", url))
        assert line.startswith("error: ") and says in line, line


def test_a_wrong_password_on_the_real_server_is_not_shown() -> None:
    url = pg_role_url()
    wrong = url.replace(PG_SECRET, "Wr0ng-k7Pz")
    line = refused(cli("pending", "--store", wrong), "Wr0ng-k7Pz")
    assert "password authentication failed" in line, line
    line = refused(cli("show", "nope", "--store", url))  # (signed in: the store is not made)
    assert line == "error: the PostgreSQL database holds no intermission store; nothing was created"


def test_commands_to_paste_mask_the_password_or_read_intermission_store() -> None:
    url = pg_role_url()
    demo = cli("demo", "--store", url)
    assert demo.returncode == 0, demo.stderr
    assert PG_SECRET not in demo.stdout + demo.stderr
    masked = url.replace(PG_SECRET, MASK)
    assert (
        f"python -m intermission approve change-001 --reviewer alice --store '{masked}'"
        in demo.stdout
    ), demo.stdout
    # the URL from the environment: out of argv, and the commands to paste read it again
    env = {"INTERMISSION_STORE": url}
    again = cli("demo", "--session", "change-002", env=env)
    assert again.returncode == 0, again.stderr
    assert "python -m intermission approve change-002 --reviewer alice\n" in again.stdout
    assert PG_SECRET not in again.stdout + again.stderr
    pending = cli("pending", env=env)
    assert pending.returncode == 0 and "change-001" in pending.stdout, pending.stderr
    assert "change-002" in pending.stdout
    approve = cli("approve", "change-002", "--store", url.replace(PG_SECRET, "Wr0ng-k7Pz"),
                  env=env)  # --store wins over INTERMISSION_STORE  # fmt: skip
    assert "password authentication failed" in refused(approve, "Wr0ng-k7Pz")


def test_tracebacks_and_log_lines_of_the_cli_process_are_masked() -> None:
    # what the CLI's process installs first (main() run as a program): a bug's traceback,
    # another thread's and a log record (message and traceback) say no password
    code = (
        "import logging, sys, threading\n"
        "from intermission._secrets import mask_process_output\n"
        "mask_process_output()\n"
        f"url = {URL!r}\n"
        "logging.getLogger('x').warning('store %s', url)\n"
        "try:\n"
        "    raise ValueError(url)\n"
        "except ValueError:\n"
        "    logging.getLogger('x').exception('failed')\n"
        "t = threading.Thread(target=lambda: 1 / 0 if url else 0)\n"
        "t.start(); t.join()\n"
        "raise RuntimeError(url)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1
    assert PG_SECRET not in done.stderr, done.stderr
    assert "store postgresql://ann:***@127.0.0.1:1/app" in done.stderr
    assert "ValueError: postgresql://ann:***@" in done.stderr
    assert "ZeroDivisionError" in done.stderr  # (another thread's)
    assert "RuntimeError: postgresql://ann:***@" in done.stderr


# -- the masker ---------------------------------------------------------------------------

SAFE = st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=12)
PASSWORD = st.text(min_size=6, max_size=30).filter(lambda p: p.strip() == p and p.isprintable())
RAW = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="\"'"),
    min_size=6, max_size=30,
)  # fmt: skip


@given(st.sampled_from(["postgresql", "postgres", "https", "redis"]), SAFE, PASSWORD, SAFE,
       st.one_of(st.none(), st.integers(1, 65535)), SAFE)  # fmt: skip
@example("postgresql", "ann", "p@ss:/?#word", "db", 5432, "app")
def test_no_encoded_password_survives(
    scheme: str, user: str, password: str, host: str, port: int | None, path: str
) -> None:
    secret = quote(password, safe="")
    url = f"{scheme}://{user}:{secret}@{host}" + (f":{port}" if port else "") + f"/{path}"
    assume(secret not in url.replace(f":{secret}@", ":@", 1))  # (not by chance elsewhere)
    out = mask_url(url)
    assert urlsplit(out).password == MASK and urlsplit(out).hostname == host
    assert out == url.replace(f":{secret}@", f":{MASK}@", 1)
    line = mask_url(f"error: cannot connect ('{url}'): retry")
    assert secret not in line and f"'{out}'" in line
    assert secret in passwords_in(url) and password in passwords_in(url)


@given(SAFE, RAW, SAFE, SAFE)
@example("ann", "12/345", "db", "app")  # (a password of digits and a raw /: not a port)
@example("ann", "p@ss@word", "db", "app")
def test_no_raw_password_survives(user: str, password: str, host: str, path: str) -> None:
    url = f"postgresql://{user}:{password}@{host}:5432/{path}?sslmode=require"
    assume(password not in url.replace(f":{password}@", ":@", 1))
    out = mask_url(url, whole=True)
    assert password not in out and MASK in out
    assert password not in mask_url(f"invalid choice: '{url}' (choose from …)")
    assert password not in mask_known(f"bad: '{url}' \"{password}\"", passwords_in(url))


@given(SAFE, RAW.filter(lambda p: not {"&", "#"} & set(p)), SAFE)
def test_no_query_or_keyword_password_survives(user: str, password: str, host: str) -> None:
    query = f"postgresql://{host}/app?user={user}&password={password}&sslmode=require"
    assert mask_url(query) == f"postgresql://{host}/app?user={user}&password=***&sslmode=require"
    keywords = f"host={host} user={user} password={password} dbname=app"
    assert mask_url(keywords) == f"host={host} user={user} password=*** dbname=app"
    quoted = f"host={host} password='{password} \\' x' dbname=app"
    assert mask_url(quoted) == f"host={host} password=*** dbname=app"


PORT = st.one_of(st.none(), st.integers(1, 65535))


@given(st.sampled_from(["postgresql", "https", "sqlite"]), SAFE, SAFE, PORT, SAFE,
       st.text("abc=&.@", max_size=20))  # fmt: skip
def test_urls_without_a_password_are_unchanged(
    scheme: str, user: str, host: str, port: int | None, path: str, query: str
) -> None:
    assume("password" not in query)
    url = f"{scheme}://{user}@{host}" + (f":{port}" if port else "") + f"/{path}?{query}"
    assert mask_url(url) == url and mask_url(url, whole=True) == url
    assert passwords_in(url) == []


@given(st.text())
def test_text_without_a_password_is_unchanged(text: str) -> None:
    assume("://" not in text and "password" not in text.lower())
    assert mask_url(text) == text


def test_option_values_argparse_echoes() -> None:
    assert mask_options("unrecognized arguments: --tokn abc --api-key=k --auth a.yaml") == (
        "unrecognized arguments: --tokn *** --api-key=*** --auth a.yaml"
    )
    assert mask_options("ambiguous option: --t=abc could match --token, --token-file") == (
        "ambiguous option: --t=*** could match --token, --token-file"
    )


def test_store_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERMISSION_STORE", raising=False)
    assert store_option("my store.sqlite") == " --store 'my store.sqlite'"
    assert store_option(URL) == " --store 'postgresql://ann:***@127.0.0.1:1/app'"
    monkeypatch.setenv("INTERMISSION_STORE", URL)
    assert store_option(URL) == ""


def test_the_token_variable_is_not_left_for_the_tools_children(tmp_path: Path) -> None:
    env = {"INTERMISSION_TOKEN": "tok-1\n", "HOME": "/home/x"}
    assert read_token(None, env) == "tok-1" and env == {"HOME": "/home/x"}
    token = tmp_path / "token"
    token.write_text("tok-2\r\n")
    token.chmod(0o600)
    env = {"INTERMISSION_TOKEN": "tok-1"}
    assert read_token(str(token), env) == "tok-2" and env == {}  # (the file wins)
    assert read_token(None, {}) is None
