"""What a person is shown of the interrupts a notification concerns: tool arguments as a
bounded summary with secrets left out, and what an approval policy still needs. The store
keeps notifications raw (see :mod:`intermission.stores.outbox_rules`); this is made when
one is sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._json import canonical_dumps
from .redact import REDACTED, redact_text, secret_name

__all__ = ["interrupts_of", "summarize"]


# -- argument summaries: bounded, secrets left out ----------------------------------------
_TEXT = 200
_ITEMS = 10
_DEPTH = 3
_BUDGET = 2000


def _cut(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        # redacted before it is cut (a secret cut in half is no longer shaped like one);
        # cut first to a bound, so a huge value costs no more than a short one
        cut = len(value) > _TEXT * 4
        value = redact_text(value[: _TEXT * 4])
        if cut:  # its last word may be a secret's head no shape matches (``x://u:pw`` of
            # ``x://u:pwd@h``): it goes too
            value = value[: len(value) - len(value.split()[-1])] if value.split() else ""
        return value if len(value) <= _TEXT else f"{value[:_TEXT]}… (+{len(value) - _TEXT} chars)"
    if isinstance(value, dict):
        if depth >= _DEPTH:
            return f"{{{len(value)} keys}}"
        items = list(value.items())
        out = {
            redact_text(str(k)[:_TEXT]): REDACTED if secret_name(k) else _cut(v, depth + 1)
            for k, v in items[:_ITEMS]
        }
        if len(items) > _ITEMS:
            out["…"] = f"+{len(items) - _ITEMS} keys"
        return out
    if isinstance(value, (list, tuple)):
        if depth >= _DEPTH:
            return f"[{len(value)} items]"
        out_list = [_cut(v, depth + 1) for v in value[:_ITEMS]]
        if len(value) > _ITEMS:
            out_list.append(f"… +{len(value) - _ITEMS} items")
        return out_list
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return f"<{type(value).__name__}>"


def summarize(args: dict[str, Any]) -> dict[str, Any]:
    """Tool arguments as a notification shows them: values cut to 200 characters, at most
    10 keys or items per level and 3 levels, secrets redacted at every level (by name:
    password, token, api_key, dsn, …; by shape: URL userinfo, token prefixes, JWTs, PEM
    keys; see :mod:`intermission.notify.redact`), about 2 KB at most in all."""
    out = _cut(args, 0)
    if not isinstance(out, dict):
        return {}
    # (a character is at most 6 in JSON, \uXXXX: a short repr needs no exact count)
    if len(repr(out)) * 6 <= _BUDGET or len(canonical_dumps(out)) <= _BUDGET:
        return out
    kept: dict[str, Any] = {}
    size = 2
    for name, value in out.items():  # the first keys, as many as fit, each at most whole
        item = len(canonical_dumps({name: value}))
        if size + item > _BUDGET - 80:
            break
        kept[name] = value
        size += item
    kept["…"] = f"cut: {len(out) - len(kept)} more argument(s), too long to show here"
    return kept


# -- interrupts ---------------------------------------------------------------------------
def _policy(policy: Any, approvers: Any, given: int) -> dict[str, Any] | None:
    """What an approval policy still needs: its plain fields (roles, approvals, …), who may
    decide, and how many approvals are still missing."""
    data: dict[str, Any] = {}
    if isinstance(policy, Mapping):
        data = {
            str(k): v
            for k, v in policy.items()
            if v is None
            or isinstance(v, (str, int, float, bool))
            or (isinstance(v, list) and all(isinstance(x, str) for x in v))
        }
    if isinstance(approvers, list) and approvers:
        data["reviewers"] = sorted(map(str, approvers))
    if not data:
        return None
    approvals = data.get("approvals")
    if isinstance(approvals, int) and not isinstance(approvals, bool):
        data["approvals_needed"] = max(0, approvals - given)
    return data


def _text(value: Any) -> Any:
    """A tool's name or a reason, its secrets redacted (a name is text a model chose too)."""
    return redact_text(value) if isinstance(value, str) else value


def _task(task: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    uuid = str(task.get("call_uuid"))
    args = _shown_args(task.get("args"), task.get("notify_args"))
    done = given.get(uuid)
    reason = task.get("reason")
    shown = summarize(args)
    return {
        "id": uuid, "type": "tool_call", "tool": _text(task.get("tool_name")),
        "arguments": shown, "whole": args == task.get("args") and shown == args,
        "reason": _text(reason), "deadline_ms": task.get("deadline_ms"),
        "asked_ms": task.get("created_ms"),
        "policy": _policy(task.get("policy"), task.get("approvers"),
                          len(done) if isinstance(done, list) else 0),
    }  # fmt: skip


def _shown_args(args: Any, notify_args: Any) -> dict[str, Any]:
    """The arguments a notification may show: all (``notify_args`` unset or True), none
    (False), or the named ones (a list), as ``on_tool(name, notify_args=)`` said."""
    if not isinstance(args, dict) or notify_args is False:
        return {}
    if isinstance(notify_args, list):
        return {k: v for k, v in args.items() if k in notify_args}
    return args


def _approval(approval: Mapping[str, Any], reason: Any) -> dict[str, Any]:
    request = approval.get("request")
    args = {"request": request} if request is not None else {}
    shown = summarize(args)
    return {
        "id": approval.get("id"), "type": "confirmation", "tool": None,
        "arguments": shown, "whole": shown == args,
        "reason": _text(reason), "deadline_ms": approval.get("deadline_ms"),
        "policy": _policy(approval.get("policy"), None, 0),
    }  # fmt: skip


def interrupts_of(payload: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The interrupts a stored notification concerns, as shown, and the roles that may
    decide them (with any the notification names itself, an escalation's)."""
    found_given = payload.get("given")
    given: Mapping[str, Any] = found_given if isinstance(found_given, Mapping) else {}
    out = [_task(t, given) for t in payload.get("tasks") or () if isinstance(t, Mapping)]
    approval = payload.get("approval")
    if isinstance(approval, Mapping):
        out.append(_approval(approval, payload.get("reason")))
    out += [{**i, "tool": _text(i.get("tool"))} for i in payload.get("items") or ()
            if isinstance(i, Mapping)]  # fmt: skip
    roles = {str(r) for r in payload.get("roles") or ()}
    for item in out:
        found = (item.get("policy") or {}).get("roles")
        roles.update(map(str, found) if isinstance(found, list) else ())
    return out, sorted(roles)
