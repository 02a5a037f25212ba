"""Who calls the AG-UI server: tokens kept as hashes and compared in constant time, JWTs
verified against issuer, audience, key (or JWKS) and expiry, an auth file for ``serve
--auth``, ``GET /whoami``; with auth on, the resume's principal decides and a client-sent
``metadata.reviewer`` is a display note; the prompt's principal is the requester."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("jwt", "PyJWT (pip install 'intermission[agui]')")

import httpx  # noqa: E402
import jwt  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from intermission import Principal, UsageError  # noqa: E402
from intermission.agui import agui_app  # noqa: E402
from intermission.agui.auth import JWTAuth, TokenAuth, hash_token, load_auth  # noqa: E402
from intermission.stores import MemoryStore  # noqa: E402

from ._server import Server, parse_sse  # noqa: E402
from .agents import AGENTS  # noqa: E402

ISS, AUD = "https://login.test/", "intermission"


def pem(key: Any) -> bytes:
    return bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ))  # fmt: skip


def token(key: Any, alg: str = "RS256", **claims: Any) -> str:
    base = {"sub": "bob", "roles": ["sre"], "iss": ISS, "aud": AUD, "exp": time.time() + 600}
    return str(jwt.encode({**base, **claims}, key, algorithm=alg))


def bearer(value: str) -> str:
    return f"Bearer {value}"


@pytest.fixture(scope="module")
def rsa_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_tokens_are_kept_hashed_and_name_their_principal() -> None:
    auth = TokenAuth({"s3cret": Principal("alice", {"sre"}),
                      hash_token("other"): Principal("bob")})  # fmt: skip
    assert hash_token("s3cret") == "sha256:" + hashlib.sha256(b"s3cret").hexdigest()
    assert auth.authenticate(bearer("s3cret")) == Principal("alice", {"sre"})
    assert auth.authenticate(bearer("other")) == Principal("bob")
    assert auth.authenticate("bearer   s3cret ") == Principal("alice", {"sre"})
    for refused in (None, "", "s3cret", bearer("s3cre"), bearer("s3cret!"), "Basic s3cret",
                    bearer(hash_token("s3cret")), bearer("x" * 20_000)):  # fmt: skip
        assert auth.authenticate(refused) is None, refused
    kept = repr(auth) + repr(vars(auth) if hasattr(auth, "__dict__") else "")
    assert "s3cret" not in kept and "other" not in kept
    assert b"s3cret" not in b"".join(h for h, _ in auth._known)  # only digests
    with pytest.raises(UsageError, match="64 hex digits"):
        TokenAuth({"sha256:abc": Principal("x")})
    with pytest.raises(UsageError, match="Principal"):
        TokenAuth({"t": "alice"})  # type: ignore[dict-item]


def test_jwts_are_verified_against_issuer_audience_key_and_expiry(rsa_key: Any) -> None:
    auth = JWTAuth(issuer=ISS, audience=AUD, key=pem(rsa_key))
    assert auth.authenticate(bearer(token(rsa_key))) == Principal("bob", {"sre"})
    assert auth.authenticate(bearer(token(rsa_key, roles="sre dba"))) == Principal(
        "bob", {"sre", "dba"}
    )
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "expired": token(rsa_key, exp=time.time() - 10),
        "no expiry": jwt.encode({"sub": "bob", "iss": ISS, "aud": AUD}, rsa_key, algorithm="RS256"),
        "another audience": token(rsa_key, aud="elsewhere"),
        "another issuer": token(rsa_key, iss="https://evil.test/"),
        "another key": token(other),
        "no signature": jwt.encode({"sub": "bob", "iss": ISS, "aud": AUD,
                                    "exp": time.time() + 60}, None, algorithm="none"),
        "the public key as an HMAC secret": _hs256_with(pem(rsa_key)),
        "no name": token(rsa_key, sub=None),
        "not a token": "abc.def.ghi",
    }  # fmt: skip
    for why, value in refused.items():
        assert auth.authenticate(bearer(value)) is None, why
    with pytest.raises(UsageError, match="shared secret"):
        JWTAuth(issuer=ISS, audience=AUD, key=pem(rsa_key), algorithms=["HS256"])
    with pytest.raises(UsageError, match=r"key \(PEM\) or a jwks"):
        JWTAuth(issuer=ISS, audience=AUD)
    with pytest.raises(UsageError, match="not a PEM public key"):
        JWTAuth(issuer=ISS, audience=AUD, key="-----BEGIN nonsense")


def _hs256_with(secret: bytes) -> str:
    """An HS256 token whose secret is the server's public key (the key-confusion attack)."""
    import base64
    import hmac

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"sub": "mallory", "iss": ISS, "aud": AUD,
                           "exp": int(time.time()) + 60}).encode())  # fmt: skip
    sig = b64(hmac.new(secret, head + b"." + body, hashlib.sha256).digest())
    return (head + b"." + body + b"." + sig).decode()


def test_a_jwks_picks_its_key_by_kid_and_nested_roles_claims() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwks = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "ES256"}]}
    auth = JWTAuth(issuer=ISS, audience=[AUD, "other"], jwks=jwks,
                   roles_claim="realm_access.roles", name_claim="preferred_username")  # fmt: skip
    claims = {"preferred_username": "ann", "realm_access": {"roles": ["lead"]}}
    good = jwt.encode({"iss": ISS, "aud": AUD, "exp": time.time() + 60, **claims}, key,
                      algorithm="ES256", headers={"kid": "k1"})  # fmt: skip
    assert auth.authenticate(bearer(good)) == Principal("ann", {"lead"})
    unknown = jwt.encode({"iss": ISS, "aud": AUD, "exp": time.time() + 60, **claims}, key,
                         algorithm="ES256", headers={"kid": "k2"})  # fmt: skip
    assert auth.authenticate(bearer(unknown)) is None


def test_an_auth_file_keeps_hashes_and_names_its_key_file(tmp_path: Path, rsa_key: Any) -> None:
    (tmp_path / "jwt.pem").write_bytes(pem(rsa_key))
    (tmp_path / "auth.yaml").write_text(
        "tokens:\n"
        f"  - hash: {hash_token('alice-token')}\n    name: alice\n    roles: [sre]\n"
        "jwt:\n"
        f"  issuer: {ISS}\n  audience: {AUD}\n  key_file: jwt.pem\n"
    )
    auth = load_auth(tmp_path / "auth.yaml")
    assert auth.authenticate(bearer("alice-token")) == Principal("alice", {"sre"})
    assert auth.authenticate(bearer(token(rsa_key))) == Principal("bob", {"sre"})
    assert auth.authenticate(bearer("nope")) is None
    bad = {
        "plain.json": {"tokens": [{"token": "alice-token", "name": "alice"}]},
        "unknown.json": {"tokens": [{"hash": hash_token("x"), "name": "x", "admin": True}]},
        "nothing.json": {},
        "nokey.json": {"jwt": {"issuer": ISS, "audience": AUD}},
        "missing.json": {"jwt": {"issuer": ISS, "audience": AUD, "key_file": "gone.pem"}},
    }
    says = {
        "plain.json": "keep the token's hash", "unknown.json": "unknown",
        "nothing.json": "an auth file holds", "nokey.json": "key", "missing.json": "gone.pem",
    }  # fmt: skip
    for name, data in bad.items():
        (tmp_path / name).write_text(json.dumps(data))
        with pytest.raises(UsageError, match=says[name]):
            load_auth(tmp_path / name)
    with pytest.raises(UsageError, match="cannot read"):
        load_auth(tmp_path / "absent.yaml")


def _client(**kw: Any) -> tuple[TestClient, MemoryStore]:
    store = MemoryStore()
    return TestClient(agui_app(AGENTS, store, **kw), base_url="http://127.0.0.1"), store


def test_whoami_and_a_resume_decided_by_the_principal_not_the_typed_name(rsa_key: Any) -> None:
    auth = TokenAuth({"tok-carol": Principal("carol", {"ops"}),
                      "tok-alice": Principal("alice", {"sre"})})  # fmt: skip
    client, store = _client(auth=auth)
    # asked without credentials, it says what sign-in the server needs (the console shows
    # a token field only); a wrong token is still refused
    nobody = client.get("/whoami")
    assert nobody.status_code == 200 and nobody.json() == {
        "name": None, "roles": [], "authenticated": False, "signIn": "token"}  # fmt: skip
    assert client.get("/interrupts").status_code == 401  # (whoami only: no data without it)
    assert client.get("/whoami", headers={"Authorization": bearer("tok-x")}).status_code == 401
    me = client.get("/whoami", headers={"Authorization": bearer("tok-alice")}).json()
    assert me == {"name": "alice", "roles": ["sre"], "authenticated": True, "signIn": "token"}
    assert client.get("/").status_code == 200  # the console page itself holds no data
    body = {"threadId": "T", "runId": "r1", "messages": [
        {"id": "u", "role": "user", "content": "go"}]}  # fmt: skip
    r = client.post("/agents/ops", json=body, headers={"Authorization": bearer("tok-carol")})
    (iid,) = [i["id"] for i in parse_sse(r.text)[-1][1]["outcome"]["interrupts"]]
    s = store.load("T")
    assert s.requester is not None and (s.requester.name, s.requester.via) == ("carol", "agui")
    assert s.hitl.tasks[0].requester == s.requester  # recorded on what it asked for
    resume = {"threadId": "T", "runId": "r2", "messages": [], "resume": [
        {"interruptId": iid, "status": "resolved", "payload": {"approved": True},
         "metadata": {"reviewer": "carol"}}]}  # fmt: skip
    r = client.post("/agents/ops", json=resume, headers={"Authorization": bearer("tok-alice")})
    assert parse_sse(r.text)[-1][1]["type"] == "RUN_FINISHED"
    (done,) = [e.decision for e in store.load("T").events if e.kind == "hitl_decided"]
    assert (done.reviewer, done.roles, done.via, done.authenticated, done.display) == (
        "alice",
        ["sre"],
        "agui",
        True,
        "carol",
    )  # the name the client typed is a display note, never who decided
    thread = client.get("/threads/T", headers={"Authorization": bearer("tok-alice")}).json()
    assert thread["decisions"][0]["reviewer"] == "alice"


def test_one_token_is_one_principal_and_not_both(rsa_key: Any) -> None:
    client, _ = _client(token="only")
    me = client.get("/whoami", headers={"Authorization": bearer("only")}).json()
    assert me == {"name": "token-holder", "roles": [], "authenticated": True, "signIn": "token"}
    assert client.get("/whoami", headers={"Authorization": bearer("nope")}).status_code == 401
    with pytest.raises(UsageError, match="not both"):
        agui_app(AGENTS, MemoryStore(), token="t", auth=TokenAuth({"t": Principal("x")}))
    open_client, _ = _client()
    assert open_client.get("/whoami").json() == {
        "name": None, "roles": [], "authenticated": False, "signIn": "name"}  # fmt: skip


def test_serve_takes_an_auth_file(tmp_path: Path, rsa_key: Any) -> None:
    (tmp_path / "jwt.pem").write_bytes(pem(rsa_key))
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({
        "tokens": [{"hash": hash_token("tok-a"), "name": "alice", "roles": ["sre"]}],
        "jwt": {"issuer": ISS, "audience": AUD, "key_file": "jwt.pem"},
    }))  # fmt: skip
    server = Server(str(tmp_path / "s.db"), tmp_path / "effects", auth=auth)
    try:

        def whoami(value: str) -> httpx.Response:
            return httpx.get(server.url + "/whoami", headers={"Authorization": bearer(value)},
                             timeout=30)  # fmt: skip

        assert whoami("tok-a").json()["name"] == "alice"
        assert whoami(token(rsa_key)).json() == {
            "name": "bob", "roles": ["sre"], "authenticated": True, "signIn": "token"}  # fmt: skip
        assert whoami("tok-b").status_code == 401
        assert whoami(token(rsa_key, exp=time.time() - 5)).status_code == 401
    finally:
        server.stop()
    # a plain token in the file: serve refuses to start, saying why
    auth.write_text(json.dumps({"tokens": [{"token": "tok-a", "name": "alice"}]}))
    out = subprocess.run(
        [sys.executable, "-m", "intermission", "serve", "--auth", str(auth), "--store",
         str(tmp_path / "s.db"), "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "keep the token's hash" in out.stderr
