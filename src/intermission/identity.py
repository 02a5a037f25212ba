"""One identity map for every surface: who the people are, and how each surface's
credential (a bearer token, a JWT subject, an OS login, a Slack user id) names one of them.

An identity file (JSON or YAML; what ``serve --auth FILE`` and every CLI command's
``--auth FILE`` / ``$INTERMISSION_AUTH`` read) declares people once::

    principals:                  # people and their roles
      frank: {roles: [finance]}
    tokens:                      # kept as hashes: printf %s "$TOKEN" | sha256sum
      - hash: "sha256:9f86d0..."
        name: frank              # a token entry's roles merge into frank's
    os_users: {frank: frank}     # OS login -> person (the CLI, notebooks)
    slack_users: {U123: frank}   # Slack user id -> person
    jwt: {issuer: ..., audience: ..., key_file: ...}   # see intermission.agui.auth

A mapped login, Slack id or JWT subject gets that person's roles, so one person is one
principal (one vote) whichever surface they use. Roles never come from OS group names. A
file the OS user running the CLI (or a notebook) can change cannot say who that user is —
they could map themselves to anyone — so ``os_users:`` is honoured only from a file they
cannot write (an administrator's: ``chown root FILE; chmod 644 FILE``); root is trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._check import shown
from .errors import UsageError
from .principals import Principal, name_key, os_login, principal_name

__all__ = ["IdentityMap", "load_identity"]

_KEYS = {"principals", "tokens", "jwt", "os_users", "slack_users"}
_PERSON_KEYS = {"roles"}
_TOKEN_KEYS = {"hash", "name", "roles"}
_PREFIX = "sha256:"


@dataclass(frozen=True)
class IdentityMap:
    """People by name (with roles), and what names them on each surface.

    Made from an identity file by :func:`load_identity`, or in code::

        IdentityMap({"frank": Principal("frank", {"finance"})}, os_users={"frank": "frank"})
    """

    people: Mapping[str, Principal] = field(default_factory=dict)
    """Every person, by name."""
    os_users: Mapping[str, str] = field(default_factory=dict)
    """OS login → a person's name."""
    slack_users: Mapping[str, str] = field(default_factory=dict)
    """Slack user id → a person's name."""
    tokens: Mapping[str, str] = field(default_factory=dict)
    """Token hash (``sha256:<hex>``) → a person's name."""
    jwt: Mapping[str, Any] | None = None
    """The JWT settings (``intermission.agui.JWTAuth``'s keyword arguments), if any."""
    source: str | None = None
    """The file it was read from (named in messages)."""
    editable_by: int | None = None
    """The uid of the (non-root) user this process runs as when that user can change the
    file it was read from: then it cannot vouch for that user's own OS login."""

    def __post_init__(self) -> None:
        people: dict[str, Principal] = {}
        for key, p in dict(self.people).items():
            if not isinstance(p, Principal):
                raise UsageError(f"people map names to Principals, not {shown(p)}")
            if name_key(key) != name_key(p.name):
                raise UsageError(f"people[{key!r}] is named {p.name!r}: use one name")
            people[name_key(p.name)] = p
        object.__setattr__(self, "people", people)
        for what in ("os_users", "slack_users", "tokens"):
            mapping = dict(getattr(self, what))
            for credential, name in mapping.items():
                if not isinstance(credential, str) or not credential:
                    raise UsageError(
                        f"{what}: a key is a non-empty string, not {shown(credential)}"
                    )
                if not isinstance(name, str) or name_key(name) not in people:
                    declared = ", ".join(sorted(p.name for p in people.values())) or "none"
                    raise UsageError(
                        f"{what}: {credential!r} maps to {shown(name)}, who is not declared "
                        f"under principals: (declared: {declared})"
                    )
            object.__setattr__(self, what, mapping)

    def person(self, name: str | None) -> Principal | None:
        """The declared person of that name (compared case-folded), or None."""
        if not name:
            return None
        return self.people.get(name_key(name))

    def token_principals(self) -> dict[str, Principal]:
        """Token hash → the person it signs in (for ``TokenAuth``)."""
        return {h: self.people[name_key(n)] for h, n in self.tokens.items()}

    def jwt_principal(self, name: str, roles: frozenset[str] = frozenset()) -> Principal:
        """The principal of a verified JWT whose name claim is ``name``: a declared person
        of that name gets their declared roles as well as the token's."""
        known = self.person(name)
        if known is None:
            return Principal(name, roles)
        return Principal(known.name, known.roles | roles)

    def os_principal(self, login: str | None = None) -> Principal | None:
        """The person an OS login (default: this process's, by effective uid) maps to by
        ``os_users:``, with their roles; None for an unmapped login."""
        if login is None:
            login = os_login()
            if self.editable_by is not None:
                # whoever can edit the map could map themselves to anyone: only a file
                # they cannot change (an administrator's) says who their login is
                raise UsageError(
                    f"the identity file {self.source!r} can be changed by the OS user "
                    f"{login!r} running this, so it cannot say who {login!r} is: have "
                    "another account own it and keep it unwritable for others "
                    f"(sudo chown root {self.source}; sudo chmod 644 {self.source})"
                )
        name = self.os_users.get(login)
        return self.people[name_key(name)] if name is not None else None

    def slack_principal(self, user_id: str) -> Principal | None:
        """The person a Slack user id maps to by ``slack_users:``, or None."""
        name = self.slack_users.get(user_id)
        return self.people[name_key(name)] if name is not None else None

    def __repr__(self) -> str:  # (never the token hashes)
        return (
            f"IdentityMap({len(self.people)} people, {len(self.tokens)} token(s), "
            f"{len(self.os_users)} OS user(s), {len(self.slack_users)} Slack user(s)"
            + (", jwt" if self.jwt is not None else "") + ")"
        )


def _editable_by_me(fd: int) -> int | None:
    """The effective uid when the user this process runs as (not root) can change the open
    file: they own it, or it is writable by a group of theirs, by everyone, or by an ACL."""
    import os
    import stat

    euid = os.geteuid() if hasattr(os, "geteuid") else None
    if euid is None or euid == 0:
        return None
    st = os.fstat(fd)
    mine = st.st_uid == euid
    group = bool(st.st_mode & stat.S_IWGRP) and st.st_gid in {os.getegid(), *os.getgroups()}
    if mine or group or bool(st.st_mode & stat.S_IWOTH):
        return euid
    # the mode bits miss a POSIX ACL granting this user write (setfacl -m u:me:rw): ask
    # the kernel about the very file that was opened
    proc = f"/proc/self/fd/{fd}"
    if os.access in os.supports_effective_ids and os.path.exists(proc):
        if os.access(proc, os.W_OK, effective_ids=True):
            return euid
    return None


def _read(file: Path) -> tuple[Any, int | None]:
    try:
        with open(file, "rb") as f:  # (checked on the file read, not on its name)
            editable = _editable_by_me(f.fileno())
            text = f.read().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the identity file {str(file)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"the identity file {str(file)!r} is not UTF-8: {exc}") from None
    return _parse(file, text), editable


class _Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """A JSON object, refused when it names a key twice (the parser would keep the last)."""
    out: dict[Any, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _yaml_load(text: str) -> Any:
    """YAML, refused when a mapping names a key twice: PyYAML keeps the last one silently,
    and in an identity file that is a login, a token or a person said two ways."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        keys = [loader.construct_object(k, deep=True) for k, _ in node.value]
        for i, key in enumerate(keys):
            if isinstance(key, (str, int, float, bool)) and key in keys[:i]:
                raise _Duplicate(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.construct_mapping = mapping  # type: ignore[method-assign,assignment]
    return yaml.load(text, Loader=Loader)  # (a SafeLoader: no objects built)


def _parse(file: Path, text: str) -> Any:
    try:
        if file.suffix.lower() == ".json":
            return json.loads(text, object_pairs_hook=_pairs)
        return _yaml_load(text)
    except _Duplicate as exc:
        raise UsageError(
            f"the identity file {str(file)!r} names {str(exc.args[0])!r} twice in one "
            "mapping (only one would count, silently): say each login, id and person once"
        ) from None
    except ImportError:
        raise UsageError(
            f"the identity file {str(file)!r} is YAML and PyYAML is not installed: "
            "pip install pyyaml, or write it as .json"
        ) from None
    except Exception as exc:
        raise UsageError(f"the identity file {str(file)!r} is not JSON or YAML: {exc}") from None


def _roles(value: Any, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str) or not isinstance(value, list):
        raise UsageError(f"{where}.roles is a list of role names, not {shown(value)}")
    return Principal("x", value).roles


def _mapping(data: Mapping[str, Any], key: str) -> dict[str, str]:
    value = data.get(key) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise UsageError(f"'{key}' maps names to people: {{login: person}}, not {shown(value)}")
    return {str(k): principal_name(v, f"{key}[{k!r}]") for k, v in value.items()}


def identity_from_dict(
    data: Any, base: Path | None = None, source: str | None = None
) -> IdentityMap:
    """The identity map of an identity file's content (see the module docstring)."""
    if not isinstance(data, dict) or not data or set(data) - _KEYS:
        unknown = sorted(set(data) - _KEYS) if isinstance(data, dict) else []
        raise UsageError(
            "an identity file holds principals, tokens, jwt, os_users and slack_users"
            + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else "")
        )
    roles: dict[str, set[str]] = {}
    names: dict[str, str] = {}

    def declare(name: Any, more: frozenset[str], where: str) -> str:
        who = principal_name(name, f"{where}'s name")
        names.setdefault(name_key(who), who)
        roles.setdefault(name_key(who), set()).update(more)
        return names[name_key(who)]

    declared = data.get("principals") or {}
    if not isinstance(declared, dict):
        raise UsageError("'principals' maps names to {roles: [...]}: {frank: {roles: [finance]}}")
    seen: dict[str, Any] = {}
    for name, entry in declared.items():
        where = f"principals[{name!r}]"
        key = name_key(principal_name(name, f"{where}'s name"))
        if key in seen:  # (one person under two spellings: which roles are meant?)
            raise UsageError(
                f"principals: {seen[key]!r} and {name!r} name one person (names compare "
                "NFKC-normalised and case-folded): declare each person once"
            )
        seen[key] = name
        if entry is not None and (not isinstance(entry, dict) or set(entry) - _PERSON_KEYS):
            raise UsageError(f"{where} is {{roles: [role, ...]}}, not {shown(entry)}")
        declare(name, _roles((entry or {}).get("roles"), where), where)
    tokens: dict[str, str] = {}
    entries = data.get("tokens")
    if entries is not None:
        if not isinstance(entries, list) or not entries:
            raise UsageError("'tokens' is a list of {hash, name, roles}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or "token" in entry:
                raise UsageError(
                    f"tokens[{i}]: keep the token's hash, not the token: hash: sha256:<hex> "
                    '(printf %s "$TOKEN" | sha256sum)'
                )
            extra = set(entry) - _TOKEN_KEYS
            if extra or not isinstance(entry.get("hash"), str):
                raise UsageError(f"tokens[{i}] is {{hash: sha256:<hex>, name, roles}}; "
                                 f"unknown: {sorted(extra)}")  # fmt: skip
            if not str(entry["hash"]).startswith(_PREFIX):
                raise UsageError(f"tokens[{i}].hash starts with sha256:")
            where = f"tokens[{i}]"
            if entry["hash"] in tokens:  # (one token, two people: who signs in?)
                raise UsageError(f"tokens[{i}]: its hash is listed twice: list each token once")
            tokens[entry["hash"]] = declare(
                str(entry.get("name") or ""), _roles(entry.get("roles"), where), where
            )
    settings = data.get("jwt")
    jwt: dict[str, Any] | None = None
    if settings is not None:
        if not isinstance(settings, dict):
            raise UsageError("'jwt' holds the JWT settings (issuer, audience, key_file, ...)")
        jwt = {k: v for k, v in settings.items() if k not in ("key_file", "jwks_file")}
        for name in ("key_file", "jwks_file"):
            if name in settings:
                where_file = (base or Path(".")) / str(settings[name])
                try:
                    content = where_file.read_text(encoding="utf-8")
                except OSError as exc:
                    raise UsageError(
                        f"cannot read jwt.{name} {str(where_file)!r}: {exc.strerror}"
                    ) from None
                jwt["key" if name == "key_file" else "jwks"] = content
    people = {names[k]: Principal(names[k], roles[k]) for k in names}
    return IdentityMap(
        people, os_users=_mapping(data, "os_users"), slack_users=_mapping(data, "slack_users"),
        tokens=tokens, jwt=jwt, source=source,
    )  # fmt: skip


def load_identity(path: str | Path) -> IdentityMap:
    """Read the identity map an identity file (JSON or YAML) declares.

    The format is described in the module docstring. A wrong file is refused with a
    UsageError naming what is wrong."""
    import dataclasses

    file = Path(path)
    data, editable = _read(file)
    found = identity_from_dict(data, file.parent, str(file))
    return dataclasses.replace(found, editable_by=editable) if editable is not None else found
