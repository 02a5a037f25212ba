"""The notification config file (YAML or JSON), read into targets and a Notifier.

::

    public_url: https://review.example.com     # deep links open the console here
    poll_s: 1                                  # check the outbox at least this often
    max_attempts: 8                            # then the notification is dead (outbox --failed)
    retry_first_s: 2                           # backoff: doubles up to retry_max_s
    retry_max_s: 600
    targets:
      - type: webhook
        url: https://hooks.example.com/intermission
        secret_env: INTERMISSION_WEBHOOK_SECRET   # or secret_file: /run/secrets/webhook
        kinds: [pending, escalated, expired]      # default: every kind
      - type: slack
        url_env: SLACK_WEBHOOK_URL                # the URL is a credential: keep it out
        roles: [sre]                              # only approvals sre may decide
        interactive: true                         # Approve / Reject / Open buttons; serve
        signing_secret_env: SLACK_SIGNING_SECRET  # takes the clicks (intermission.slack)
      - type: email
        smtp: {host: smtp.example.com, port: 587, starttls: true,
               username: intermission, password_env: SMTP_PASSWORD}
        sender: intermission@example.com
        to: [oncall@example.com]
        to_roles: {finance: [cfo@example.com], sre: [sre-team@example.com]}

Secrets (a webhook's ``secret``, an SMTP ``password``, a Slack app's
``signing_secret``, any ``url``) come from the
environment (``…_env: NAME``) or a file (``…_file: PATH``, its text stripped of the final
newline); a secret written in the file itself is refused. Nothing read from either is ever
logged or put in an error message.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import NotifyConfigError
from .dispatcher import Notifier
from .email import Email
from .notification import check_public_url
from .targets import SlackWebhook, Target, Webhook

__all__ = ["NotifyConfig", "load_config", "notifier_from", "targets_of"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _WebhookSpec(_Strict):
    type: Literal["webhook"]
    name: str | None = None
    url: str | None = None
    url_env: str | None = None
    url_file: str | None = None
    secret_env: str | None = None
    secret_file: str | None = None
    kinds: list[str] | None = None
    roles: list[str] | None = None
    timeout_s: float = Field(10.0, gt=0, le=300)


class _SlackSpec(_Strict):
    type: Literal["slack"]
    name: str | None = None
    url: str | None = None
    url_env: str | None = None
    url_file: str | None = None
    interactive: bool = False
    signing_secret_env: str | None = None
    signing_secret_file: str | None = None
    kinds: list[str] | None = None
    roles: list[str] | None = None
    timeout_s: float = Field(10.0, gt=0, le=300)


class _SMTPSpec(_Strict):
    host: str
    port: int = Field(587, gt=0, lt=65536)
    starttls: bool = False
    username: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    timeout_s: float = Field(10.0, gt=0, le=300)


class _EmailSpec(_Strict):
    type: Literal["email"]
    name: str | None = None
    smtp: _SMTPSpec
    sender: str
    to: list[str] = Field(default_factory=list)
    to_roles: dict[str, list[str]] = Field(default_factory=dict)
    kinds: list[str] | None = None
    roles: list[str] | None = None


class NotifyConfig(_Strict):
    """The whole file (see the module docstring)."""

    public_url: str | None = None
    poll_s: float = Field(1.0, gt=0, le=3600)
    max_attempts: int = Field(8, ge=1, le=1000)
    retry_first_s: float = Field(2.0, ge=0.01, le=86400)
    retry_max_s: float = Field(600.0, ge=0.01, le=1e6)
    lease_s: float = Field(60.0, ge=0.1, le=86400)
    targets: list[
        Annotated[_WebhookSpec | _SlackSpec | _EmailSpec, Field(discriminator="type")]
    ] = Field(min_length=1)


_INLINE_SECRETS = ("secret", "password", "signing_secret")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHOWN_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def _refuse_inline(data: Any, where: str) -> None:
    """A secret written into the file itself is refused, before anything else is read
    (the message names the field, never its value)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in _INLINE_SECRETS:
                raise NotifyConfigError(
                    f"{key} is not written in the config file: give {key}_env: VARIABLE "
                    f"or {key}_file: PATH",
                    where=f"{where}.{key}",
                )
            _refuse_inline(value, f"{where}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _refuse_inline(value, f"{where}[{i}]")


def _secret(env: str | None, file: str | None, where: str, *, required: bool = True) -> str | None:
    """A secret from the environment or a file (``where`` ends with the field's name).
    Neither what the file holds nor a name that may be the secret pasted in the wrong
    place is ever put in an error."""
    field = where.rsplit(".", 1)[-1]
    if env is not None and file is not None:
        raise NotifyConfigError(f"give one of {field}_env and {field}_file", where=where)
    if env is not None:
        if not _ENV_NAME.fullmatch(env):  # (the secret itself, pasted in the wrong place)
            raise NotifyConfigError(
                f"{field}_env takes the name of an environment variable (letters, digits, "
                "_); what is written there is not one (not shown: it may be the secret)",
                where=where,
            )
        value = os.environ.get(env)
        if not value:
            # (named only when it reads as a variable's name: UPPER_CASE, short)
            named = env if _SHOWN_NAME.fullmatch(env) else "it names (not shown)"
            raise NotifyConfigError(f"the environment variable {named} is not set", where=where)
        return value
    if file is not None:
        try:
            return Path(file).read_text().rstrip("\r\n")
        except (OSError, ValueError) as exc:  # (the path is not shown: it may be the secret)
            raise NotifyConfigError(
                f"cannot read the file {field}_file names ({type(exc).__name__})", where=where
            ) from None
    if required:
        raise NotifyConfigError(f"missing: give {field}_env or {field}_file", where=where)
    return None


def _url(spec: _WebhookSpec | _SlackSpec, where: str) -> str:
    if spec.url is not None:
        if spec.url_env is not None or spec.url_file is not None:
            raise NotifyConfigError("give one of url, url_env and url_file", where=where)
        return spec.url
    value = _secret(spec.url_env, spec.url_file, f"{where}.url")
    assert value is not None
    return value


def targets_of(config: NotifyConfig, where: str = "config") -> list[Target]:
    """The targets a config describes (secrets read now)."""
    out: list[Target] = []
    for i, spec in enumerate(config.targets):
        at = f"{where}: targets[{i}]"
        try:
            out.append(_target(spec, at))
        except NotifyConfigError as exc:
            if exc.where:
                raise
            raise NotifyConfigError(str(exc), where=at) from None
    return out


def _target(spec: _WebhookSpec | _SlackSpec | _EmailSpec, at: str) -> Target:
    """One target of the file (its secrets read now)."""
    common: dict[str, Any] = {"name": spec.name, "kinds": spec.kinds, "roles": spec.roles}
    if isinstance(spec, _WebhookSpec):
        secret = _secret(spec.secret_env, spec.secret_file, f"{at}.secret")
        assert secret is not None
        return Webhook(_url(spec, at), secret, timeout_s=spec.timeout_s, **common)
    if isinstance(spec, _SlackSpec):
        signing = _secret(spec.signing_secret_env, spec.signing_secret_file,
                          f"{at}.signing_secret", required=spec.interactive)  # fmt: skip
        return SlackWebhook(_url(spec, at), timeout_s=spec.timeout_s,
                            interactive=spec.interactive, signing_secret=signing, **common)
    smtp = spec.smtp
    password = _secret(smtp.password_env, smtp.password_file, f"{at}.smtp.password",
                       required=smtp.username is not None)  # fmt: skip
    return Email(
        (smtp.host, smtp.port), sender=spec.sender, to=spec.to, to_roles=spec.to_roles,
        starttls=smtp.starttls, username=smtp.username, password=password,
        timeout_s=smtp.timeout_s, **common,
    )  # fmt: skip


def load_config(path: str | Path) -> NotifyConfig:
    """Read and check a config file (``.json``: JSON; otherwise YAML)."""
    where = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise NotifyConfigError(f"cannot read it ({type(exc).__name__})", where=where) from None
    try:
        if where.endswith(".json"):
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # the parser's own error, without the file's text
        raise NotifyConfigError(
            f"not valid {'JSON' if where.endswith('.json') else 'YAML'} ({type(exc).__name__})",
            where=where,
        ) from None
    _refuse_inline(data, where)
    try:
        return NotifyConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_input=False)[0]
        at = ".".join(str(p) for p in first["loc"])
        raise NotifyConfigError(first["msg"], where=f"{where}: {at}") from None


def notifier_from(
    store: Any, path: str | Path, public_url: str | None = None, *,
    default_url: str | None = None,
) -> Notifier:  # fmt: skip
    """A Notifier on ``store`` as the config file at ``path`` says: links under
    ``public_url`` given here, else the file's, else ``default_url`` (``serve``: its own)."""
    config = load_config(path)
    if config.public_url is not None and public_url is None:
        try:
            check_public_url(config.public_url)
        except NotifyConfigError as exc:
            raise NotifyConfigError(str(exc), where=f"{path}: public_url") from None
    return Notifier(
        store, targets_of(config, str(path)), public_url or config.public_url or default_url,
        max_attempts=config.max_attempts, retry_first_s=config.retry_first_s,
        retry_max_s=max(config.retry_max_s, config.retry_first_s), lease_s=config.lease_s,
        poll_s=config.poll_s,
    )  # fmt: skip
