"""Who calls the AG-UI server: bearer tokens mapped to principals, and JWTs an identity
provider (or a proxy in front of the server) signed.

``agui_app(..., auth=TokenAuth({token: Principal(...)}))`` or ``auth=JWTAuth(issuer=...,
audience=..., key=PEM | jwks=JWKS)``; ``python -m intermission serve --auth FILE`` reads
either from a JSON or YAML file (:func:`load_auth`)::

    tokens:                      # tokens are kept as hashes: printf %s "$TOKEN" | sha256sum
      - hash: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        name: alice
        roles: [sre]
    jwt:
      issuer: "https://login.example.com/"
      audience: intermission
      key_file: jwt-public.pem   # or jwks_file: jwks.json (paths relative to this file)
      algorithms: [RS256]        # optional: the key's kind says which by default
      name_claim: sub            # optional
      roles_claim: roles         # optional; a dotted path such as realm_access.roles
    principals: {alice: {roles: [sre]}}   # optional: people declared once (their roles
    os_users: {alice: alice}              # merge into a token's or a JWT subject's); the
    slack_users: {U123: alice}            # CLI and Slack map to them (intermission.identity)

A token is hashed (SHA-256) when the auth is made and every token presented is compared,
hash to hash, in constant time against every known one. A JWT must be signed by the key
(or by a key of the JWKS, chosen by its ``kid``), come from the issuer, be meant for the
audience and not be expired; HMAC algorithms and ``none`` are refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._check import shown
from ..errors import MissingDependencyError, UsageError
from ..principals import Principal

if TYPE_CHECKING:
    from ..identity import IdentityMap

__all__ = [
    "AnyAuth", "Auth", "JWTAuth", "TokenAuth", "auth_of", "hash_token", "load_auth",
]  # fmt: skip

_PREFIX = "sha256:"


class Auth(Protocol):
    """What ``agui_app(auth=...)`` takes: the principal of a request, or None."""

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an ``Authorization`` header value, or None (refused)."""
        ...


def hash_token(token: str) -> str:
    """How a token is kept: ``sha256:<hex>`` of its UTF-8 bytes (what ``printf %s TOKEN |
    sha256sum`` prints)."""
    return _PREFIX + hashlib.sha256(token.encode()).hexdigest()


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 16_384:
        return None
    return token


def _hashed(key: str) -> bytes:
    """A token map's key as the bytes of its SHA-256: ``sha256:<hex>`` as given, anything
    else a token to hash."""
    if key.startswith(_PREFIX):
        digest = key[len(_PREFIX) :].lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise UsageError(f"a token hash is sha256: and 64 hex digits, not {shown(key)}")
        return bytes.fromhex(digest)
    if not key:
        raise UsageError("a token is a non-empty string")
    return hashlib.sha256(key.encode()).digest()


class TokenAuth:
    """Bearer tokens mapped to principals: ``TokenAuth({"s3cret": Principal("alice",
    {"sre"})})``; a key ``sha256:<hex>`` is a token already hashed. Only the hashes are
    kept, and a presented token is compared in constant time against every one."""

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        if not isinstance(tokens, Mapping) or not tokens:
            raise UsageError("TokenAuth takes a mapping of tokens to principals (at least one)")
        self._known: list[tuple[bytes, Principal]] = []
        for key, principal in tokens.items():
            if not isinstance(key, str):
                raise UsageError(f"a token is a string, not {shown(key)}")
            if not isinstance(principal, Principal):
                raise UsageError(f"a token maps to a Principal, not {shown(principal)}")
            self._known.append((_hashed(key), principal))

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal whose token the header carries, or None."""
        token = _bearer(authorization)
        if token is None:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found = None
        for known, principal in self._known:  # every one, whatever matched: constant time
            if hmac.compare_digest(known, digest):
                found = principal
        return found

    def __repr__(self) -> str:  # (never the hashes)
        return f"TokenAuth({len(self._known)} token(s))"


_ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
               "ES512", "EdDSA")  # fmt: skip


def _jwt() -> Any:
    try:
        import jwt
    except ImportError:
        raise MissingDependencyError("PyJWT", "agui") from None
    return jwt


def _algorithms_of(key: Any) -> list[str]:
    """The signing algorithms a public key is for."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if isinstance(key, rsa.RSAPublicKey):
        return ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
    if isinstance(key, ec.EllipticCurvePublicKey):
        return ["ES256", "ES384", "ES512"]
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return ["EdDSA"]
    raise UsageError(f"a JWT key is an RSA, EC or Ed25519 public key, not {type(key).__name__}")


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


class JWTAuth:
    """Bearer JWTs: verified against ``key`` (a PEM public key) or ``jwks`` (a JSON Web Key
    Set: a dict, or its JSON text), the ``issuer`` and the ``audience``, and their expiry
    (required). The principal's name is the ``name_claim`` (default ``sub``), its roles the
    ``roles_claim`` (a list, or space-separated text; a dotted path reaches into nested
    claims). ``algorithms``: which signatures to accept (default: those of the key's kind;
    never HMAC or ``none``); ``leeway_s``: clock skew allowed on ``exp``/``nbf``."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str | Sequence[str],
        key: str | bytes | None = None,
        jwks: Mapping[str, Any] | str | None = None,
        algorithms: Sequence[str] | None = None,
        name_claim: str = "sub",
        roles_claim: str = "roles",
        leeway_s: float = 0.0,
    ) -> None:
        jwt = _jwt()
        if not isinstance(issuer, str) or not issuer:
            raise UsageError("JWTAuth needs the issuer (a non-empty string)")
        if isinstance(audience, str):
            audience = [audience]
        if not audience or not all(isinstance(a, str) and a for a in audience):
            raise UsageError("JWTAuth needs the audience (a string or a list of them)")
        if (key is None) == (jwks is None):
            raise UsageError("JWTAuth takes a key (PEM) or a jwks, one of them")
        for name, value in (("name_claim", name_claim), ("roles_claim", roles_claim)):
            if not isinstance(value, str) or not value:
                raise UsageError(f"{name} is a claim name, not {shown(value)}")
        if not isinstance(leeway_s, (int, float)) or not 0 <= leeway_s <= 3600:
            raise UsageError(f"leeway_s is 0 to 3600 seconds, not {shown(leeway_s)}")
        self.issuer = issuer
        self.audience = list(audience)
        self.name_claim = name_claim
        self.roles_claim = roles_claim
        self.leeway_s = float(leeway_s)
        self._key: Any = None
        self._jwks: Any = None
        if key is not None:
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            try:
                pem = key.encode() if isinstance(key, str) else bytes(key)
                self._key = load_pem_public_key(pem)
            except (ValueError, TypeError) as exc:
                raise UsageError(f"the JWT key is not a PEM public key: {exc}") from None
            default = _algorithms_of(self._key)
        else:
            try:
                data = json.loads(jwks) if isinstance(jwks, str) else dict(jwks or {})
                self._jwks = jwt.PyJWKSet.from_dict(data)
            except (ValueError, TypeError, jwt.PyJWTError) as exc:
                raise UsageError(f"the JWKS is not a JSON Web Key Set: {exc}") from None
            default = list(_ASYMMETRIC)
        chosen = list(algorithms) if algorithms is not None else default
        bad = [a for a in chosen if a not in _ASYMMETRIC]
        if bad or not chosen:
            raise UsageError(
                f"JWT algorithms are asymmetric signatures ({', '.join(_ASYMMETRIC)}), not "
                f"{shown(bad or chosen)}: a shared secret or no signature is refused"
            )
        self.algorithms = chosen

    def _signing_key(self, token: str) -> Any:
        if self._key is not None:
            return self._key
        jwt = _jwt()
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in self._jwks.keys if kid is None or k.key_id == kid]
        if kid is None and len(self._jwks.keys) != 1:
            raise jwt.InvalidTokenError("a token without a kid, and several keys")
        if not keys:
            raise jwt.InvalidTokenError("no key of the JWKS has this kid")
        return keys[0].key

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of a valid JWT in the header, or None (any failure)."""
        token = _bearer(authorization)
        if token is None or token.count(".") != 2:
            return None
        jwt = _jwt()
        try:
            claims = jwt.decode(
                token, self._signing_key(token), algorithms=self.algorithms,
                audience=self.audience, issuer=self.issuer, leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )  # fmt: skip
        except (jwt.PyJWTError, ValueError, TypeError):
            return None
        name = _claim(claims, self.name_claim)
        roles = _claim(claims, self.roles_claim)
        if isinstance(roles, str):
            roles = roles.split()
        if roles is None:
            roles = []
        if not isinstance(name, str) or not isinstance(roles, list):
            return None
        try:
            return Principal(name, frozenset(r for r in roles if isinstance(r, str)))
        except UsageError:
            return None

    def __repr__(self) -> str:
        return f"JWTAuth(issuer={self.issuer!r}, audience={self.audience!r})"


class AnyAuth:
    """Several ways in (tokens and JWTs): the first that knows the request's principal."""

    def __init__(self, auths: Sequence[Auth]) -> None:
        self.auths = list(auths)

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal the first auth finds, or None."""
        for auth in self.auths:
            found = auth.authenticate(authorization)
            if found is not None:
                return found
        return None


_JWT_KEYS = {"issuer", "audience", "key_file", "jwks_file", "algorithms", "name_claim",
             "roles_claim", "leeway_s"}  # fmt: skip


class _DeclaredRoles:
    """A JWT's principal, with the roles the identity file declares for that person."""

    def __init__(self, auth: Auth, identity: IdentityMap) -> None:
        self.auth = auth
        self.identity = identity

    def authenticate(self, authorization: str | None) -> Principal | None:
        found = self.auth.authenticate(authorization)
        if found is None:
            return None
        return self.identity.jwt_principal(found.name, found.roles)


def auth_of(identity: IdentityMap) -> Auth:
    """The auth of an identity map: its tokens, and its JWT settings (a JWT's subject gets
    the roles the map declares for that person). Refused when it has neither."""
    auths: list[Auth] = []
    if identity.tokens:
        auths.append(TokenAuth(identity.token_principals()))
    if identity.jwt is not None:
        options = dict(identity.jwt)
        if set(options) - _JWT_KEYS - {"key", "jwks"}:
            raise UsageError(f"'jwt' takes {', '.join(sorted(_JWT_KEYS))}")
        try:
            auths.append(_DeclaredRoles(JWTAuth(**options), identity))
        except TypeError as exc:  # (a required setting missing)
            raise UsageError(
                f"'jwt' needs issuer, audience and key_file or jwks_file: {exc}"
            ) from None
    if not auths:
        raise UsageError(
            "an auth file holds 'tokens' (a list) and/or 'jwt' (settings) for serve to sign "
            "people in (principals, os_users and slack_users map the other surfaces)"
        )
    return auths[0] if len(auths) == 1 else AnyAuth(auths)


def load_auth(path: str | Path) -> Auth:
    """The auth an identity file describes (JSON, or YAML; see the module docstring and
    :mod:`intermission.identity`). Refused with a UsageError naming what is wrong: a plain
    token (keep its hash), an unknown key, an unreadable key file."""
    from ..identity import load_identity

    file = Path(path)
    try:
        identity = load_identity(file)
    except UsageError as exc:
        if "an identity file holds" in str(exc):
            raise UsageError(
                "an auth file holds 'tokens' (a list) and/or 'jwt' (settings)"
                + str(exc).partition("slack_users")[2]
            ) from None
        raise
    return auth_of(identity)
