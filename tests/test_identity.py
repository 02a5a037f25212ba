"""One identity map (R60): people declared once, and the names every surface compares.

- principal names are NFKC-normalised, compared case-folded, and refused when they hide
  characters or mix scripts (Hypothesis: every accepted name is NFKC-stable, accepting is
  idempotent, and comparing is the same before and after);
- under a policy that counts people, typed names never count (unless ``asserted_ok``),
  and with ``asserted_ok`` one person typed two ways still votes once;
- ``not_requester`` without a signed-in requester: rejected or expired, never approved,
  and the progress line says why;
- the identity file: principals, a token's name and roles merging, OS users and Slack ids
  mapped to declared people, a JWT subject given the declared roles.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from intermission import (
    HITL,
    ApprovalPolicy,
    HITLDecision,
    HITLInterceptor,
    IdentityMap,
    InMemoryAgentSession,
    Principal,
    PrincipalNameError,
    ReActAgent,
    ReviewerNotAllowedError,
    ScriptedModel,
    ToolCall,
    UsageError,
    load_identity,
    tool,
)
from intermission.principals import name_key, principal_name, same_principal

RUNS: list[str] = []


@tool
def pay(amount: int) -> str:
    """Pay an invoice."""
    RUNS.append(f"pay {amount}")
    return "paid"


def paused(policy: ApprovalPolicy, requester: Principal | None = None) -> tuple[object, str]:
    def script(messages: list[object], tools: object) -> object:
        done = any(getattr(m, "role", "") == "tool" for m in messages)
        return "Done." if done else [ToolCall("pay", {"amount": 7})]

    agent = (
        ReActAgent.of(ScriptedModel(script)).name("pay").tools(pay)
        .interceptor(HITLInterceptor().on_tool("pay", policy=policy)).build()
    )  # fmt: skip
    s = InMemoryAgentSession.of("s1")
    request = agent.prompt("pay it").session(s)
    (request.principal(requester) if requester is not None else request).call()
    (task,) = s.hitl.tasks
    return s, task.call_uuid


# -- names ------------------------------------------------------------------------------


def test_names_are_normalised_compared_case_folded_and_refused_when_they_deceive() -> None:
    assert principal_name("ａｌｉｃｅ") == "alice"
    assert same_principal("Alice", "ALICE") and same_principal("alice", "ａｌｉｃｅ")
    assert not same_principal("mallory", "mallory2")
    for fine in ("alice@build-01", "first.last@example.com", "Zoë", "山田太郎", "やまだ たろう",
                 "o\u02bcbrien", "Дмитрий"):  # fmt: skip
        assert principal_name(fine) == unicodedata.normalize("NFKC", fine)
    for bad in ("\u0430lice", "alice\u200b", "al\u200dice", "\u202eecila", "ali\u2066ce",
                "alice\u3164", "al\x1bice", "paypa\u0399", "alice\ufe0f"):  # fmt: skip
        with pytest.raises(PrincipalNameError):
            principal_name(bad)
        with pytest.raises(UsageError):
            Principal(bad)


@given(st.text(max_size=24))
@example("ａｌｉｃｅ")
@example("ﬁnance")
@example("ǅ")
@example("\u00a0alice\u00a0")
def test_every_accepted_name_is_nfkc_stable_and_compares_consistently(raw: str) -> None:
    try:
        name = principal_name(raw)
    except UsageError:
        return
    assert unicodedata.normalize("NFKC", name) == name
    assert principal_name(name) == name  # accepting it again changes nothing
    assert name_key(name) == name_key(raw)
    assert same_principal(name, raw) and same_principal(name.upper(), name.lower()) == (
        name_key(name.upper()) == name_key(name.lower())
    )
    assert name_key(name_key(name)) == name_key(name)


# -- who counts under a policy ------------------------------------------------------------

QUORUM = ApprovalPolicy(approvals=2)


def test_typed_names_count_for_no_policy_that_counts_people() -> None:
    for policy in (QUORUM, ApprovalPolicy(roles={"sre"}), ApprovalPolicy(not_requester=True)):
        s, uuid = paused(policy, Principal("carol"))
        before = s.to_json()  # type: ignore[attr-defined]
        with pytest.raises(ReviewerNotAllowedError, match="asserted_ok=True") as caught:
            HITL.submit(s, uuid, HITLDecision.approve().reviewer("mallory"))
        assert caught.value.rule == "asserted"
        assert s.to_json() == before  # type: ignore[attr-defined]
    s, uuid = paused(ApprovalPolicy())  # a policy that counts nobody: a typed name decides
    assert HITL.submit(s, uuid, HITLDecision.approve().reviewer("mallory"))


def test_with_asserted_ok_one_person_typed_two_ways_still_votes_once() -> None:
    s, uuid = paused(ApprovalPolicy(approvals=2, asserted_ok=True))
    HITL.submit(s, uuid, HITLDecision.approve().reviewer("alice"))
    for same in ("ALICE", "ａｌｉｃｅ"):
        with pytest.raises(Exception, match="the same principal counts once"):
            HITL.submit(s, uuid, HITLDecision.approve().reviewer(same))
    for lookalike in ("\u0430lice", "alice\u200b"):
        with pytest.raises(PrincipalNameError):
            HITL.submit(s, uuid, HITLDecision.approve().reviewer(lookalike))
    progress = HITL.progress(s, uuid)
    assert progress is not None and progress.text.startswith("1 of 2 approvals (alice) —")


def test_the_asserted_ok_field_is_omitted_unless_set() -> None:
    assert "asserted_ok" not in ApprovalPolicy(approvals=2).model_dump(mode="json")
    assert ApprovalPolicy(asserted_ok=True).model_dump(mode="json")["asserted_ok"] is True


def test_not_requester_without_a_signed_in_requester_can_be_rejected_never_approved() -> None:
    policy = ApprovalPolicy(not_requester=True)
    s, uuid = paused(policy)  # the README's pattern: no .principal() on the request
    progress = HITL.progress(s, uuid)
    assert progress is not None
    why = "no signed-in requester was recorded: it can be rejected or expire, not approved"
    assert why in progress.text and progress.metadata()["notApprovable"] == why
    before = s.to_json()  # type: ignore[attr-defined]
    with pytest.raises(ReviewerNotAllowedError, match="no signed-in requester") as caught:
        HITL.submit(s, uuid, HITLDecision.approve(), principal=Principal("bob"))
    assert caught.value.rule == "no_requester"
    assert s.to_json() == before  # type: ignore[attr-defined]
    record = HITL.submit(s, uuid, HITLDecision.reject("who asked?"), principal=Principal("bob"))
    assert record.verdict == "reject"  # type: ignore[union-attr]
    s2, uuid2 = paused(policy, Principal("carol"))  # a signed-in requester: someone else may
    assert HITL.submit(s2, uuid2, HITLDecision.approve(), principal=Principal("bob"))


# -- the identity file ----------------------------------------------------------------------


def test_an_identity_file_declares_people_once_and_maps_every_surface(tmp_path: Path) -> None:
    from intermission.agui.auth import hash_token, load_auth

    path = tmp_path / "identity.json"
    path.write_text(json.dumps({
        "principals": {"frank": {"roles": ["finance"]}, "ann": None},
        "tokens": [{"hash": hash_token("frank-token"), "name": "Frank", "roles": ["ops"]}],
        "os_users": {"fbloggs": "frank"},
        "slack_users": {"U123": "ann"},
    }))  # fmt: skip
    identity = load_identity(path)
    frank = Principal("frank", {"finance", "ops"})  # the token's roles merge into frank's
    assert identity.os_principal("fbloggs") == frank
    assert identity.os_principal("nobody") is None
    assert identity.slack_principal("U123") == Principal("ann")
    assert identity.jwt_principal("frank", frozenset({"jwt"})).roles == {"finance", "ops", "jwt"}
    assert load_auth(path).authenticate("Bearer frank-token") == frank
    assert "frank-token" not in repr(identity) and "sha256" not in repr(identity)
    for bad, says in (
        ({"principals": {"frank": {}}, "os_users": {"fb": "frnk"}}, "not declared"),
        ({"principals": {"\u0430lice": {}}}, "mixes scripts"),
        ({"principals": {"frank": {"role": ["x"]}}}, "roles"),
        ({"people": {}}, "unknown: people"),
    ):
        path.write_text(json.dumps(bad))
        with pytest.raises(UsageError, match=says):
            load_identity(path)
    path.write_text(json.dumps({"principals": {"frank": {}}, "os_users": {"fb": "frank"}}))
    with pytest.raises(UsageError, match="'tokens'"):  # serve needs a way in
        load_auth(path)
    assert IdentityMap({"frank": frank}, os_users={"fb": "FRANK"}).os_principal("fb") == frank
