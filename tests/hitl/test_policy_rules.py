"""The rules of a policy in Python, one by one, and what a decision records about who made
it: principals (vouched for or asserted), the requester, votes that survive save, load and
fork, a rejection that must say why, the same arguments for every approval of a quorum, a
resume that voids a decision its own policy does not allow, and snapshots from before
policies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from intermission import (
    HITL,
    Actor,
    ApprovalPolicy,
    DecisionConflictError,
    DecisionRefusedError,
    HITLDecision,
    HITLInterceptor,
    InMemoryAgentSession,
    Principal,
    ReActAgent,
    ReviewerNotAllowedError,
    ScriptedModel,
    ToolCall,
    UsageError,
    Vote,
    tool,
)
from intermission.examples import build_ops_agent
from intermission.hitl.policy import progress_text
from intermission.principals import os_principal
from intermission.stores import MemoryStore, decide_and_resume

OLD = Path(__file__).parent / "data" / "snapshot_before_policies.json"
ALICE, BOB, CAROL = Principal("alice", {"sre"}), Principal("bob", {"sre"}), Principal("carol")
RAN: list[dict[str, Any]] = []


def agent(policy: ApprovalPolicy | None = None) -> Any:
    @tool
    def deploy(env: str, replicas: int = 1) -> str:
        """Deploy."""
        RAN.append({"env": env, "replicas": replicas})
        return f"deployed {env} x{replicas}"

    def script(messages: list[Any], tools: Any) -> Any:
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        seen = [m.content for m in messages[last:] if m.role == "tool"]
        return f"Done: {seen[-1]}." if seen else [ToolCall("deploy", {"env": "prod"})]

    hitl = HITLInterceptor().on_tool("deploy", policy=policy)
    return (
        ReActAgent.of(ScriptedModel(script)).name("deploy").tools(deploy).interceptor(hitl).build()
    )


def paused(policy: ApprovalPolicy | None, who: Principal | None = CAROL) -> tuple[Any, Any]:
    RAN.clear()
    s = InMemoryAgentSession.of("s")
    request = agent(policy).prompt("deploy").session(s)
    (request.principal(who) if who is not None else request).call()
    assert s.is_pending
    return s, s.hitl.tasks[0].call_uuid


def test_principals_are_checked_when_made() -> None:
    assert Principal("alice", ["sre", "sre"]) == Principal("alice", {"sre"})
    for bad in (("",), (" ",), ("a\x1b[2J",), ("x" * 201,), ("alice", "sre"), ("alice", [""])):
        with pytest.raises(UsageError):
            Principal(*bad)  # type: ignore[arg-type]
    me = os_principal()
    import grp
    import os
    import pwd

    entry = pwd.getpwuid(os.geteuid())
    assert me.name == f"{entry.pw_name}@{os.uname().nodename}"
    assert grp.getgrgid(entry.pw_gid).gr_name and not me.roles  # groups grant no role (R60)


def test_who_decided_is_recorded_vouched_for_or_asserted() -> None:
    s, uuid = paused(None)
    record = HITL.submit(s, uuid, HITLDecision.approve().reviewer("Alice A."), principal=ALICE)
    assert isinstance(record, type(s.hitl.decisions[uuid]))
    assert (record.reviewer, record.roles, record.via, record.authenticated, record.display) == (
        "alice",
        ["sre"],
        "api",
        True,
        "Alice A.",
    )  # the typed name is a display note, the principal is who decided
    t, uuid = paused(None)
    asserted = HITL.submit(t, uuid, HITLDecision.approve().reviewer("bob"))
    assert (asserted.reviewer, asserted.via, asserted.authenticated) == ("bob", "api", False)


def test_the_requester_is_recorded_kept_by_a_resume_and_reset_by_a_new_prompt() -> None:
    s, uuid = paused(None, who=CAROL)
    assert s.requester == Actor(name="carol", via="api", authenticated=True)
    assert s.hitl.tasks[0].requester == s.requester
    assert InMemoryAgentSession.restore(s.to_json()).requester == s.requester
    fork = s.fork("s2")
    assert fork.requester == s.requester  # the fork continues carol's request
    HITL.submit(s, uuid, HITLDecision.approve(), principal=ALICE)
    agent().prompt().session(s).call()  # a resume: still carol's request
    assert s.requester == Actor(name="carol", via="api", authenticated=True)
    agent().prompt("again").session(s).call()  # a new prompt naming nobody
    assert s.requester is None and s.hitl.tasks[0].requester is None


def test_a_rejection_needs_a_reason_with_or_without_a_policy() -> None:
    def refusals(s: Any, uuid: str) -> list[Any]:
        return [
            lambda: HITL.submit(s, uuid, HITLDecision.reject(), principal=ALICE),
            lambda: HITL.submit(s, uuid, HITLDecision.reject("  "), principal=ALICE),
            lambda: HITL.reject_all(s, principal=ALICE),
        ]

    for policy in (None, ApprovalPolicy(roles={"sre"})):
        s, uuid = paused(policy)
        before = s.to_json()
        for refused in refusals(s, uuid):
            with pytest.raises(DecisionRefusedError) as caught:
                refused()
            assert caught.value.rule == "reason_to_reject" and caught.value.reviewer == "alice"
        assert s.to_json() == before
        HITL.submit(s, uuid, HITLDecision.reject("no window"), principal=ALICE)
    s, uuid = paused(ApprovalPolicy(reason_to_reject=False))
    assert HITL.submit(s, uuid, HITLDecision.reject()).verdict == "reject"  # type: ignore[union-attr]


def test_votes_survive_save_load_and_fork_and_the_first_outcome_wins() -> None:
    policy = ApprovalPolicy(roles={"sre"}, approvals=2)
    s, uuid = paused(policy)
    vote = HITL.submit(s, uuid, HITLDecision.approve(), principal=ALICE)
    assert isinstance(vote, Vote) and uuid not in s.hitl.decisions
    assert HITL.pending_tasks(s)[0].call_uuid == uuid  # still open for the others
    store = MemoryStore()
    store.save(s)
    loaded = store.load("s")
    assert [v.name for v in loaded.hitl.tasks[0].votes] == ["alice"]
    assert store.pending()[0].progress == (
        "deploy: 1 of 2 approvals (alice, sre) — waiting for one more from sre"
    )
    loaded.record_checkpoint()  # (a fork starts from a checkpoint: take one after the vote)
    fork = loaded.fork("f")
    assert [v.name for v in fork.hitl.tasks[0].votes] == ["alice"]
    with pytest.raises(DecisionRefusedError, match="counts once"):
        HITL.submit(fork, uuid, HITLDecision.reject("changed my mind"), principal=ALICE)
    record = HITL.submit(fork, uuid, HITLDecision.approve(), principal=BOB)
    assert [v.name for v in record.votes] == ["alice", "bob"]  # type: ignore[union-attr]
    assert HITL.submit(fork, uuid, HITLDecision.approve(), principal=Principal("eve", {"sre"}))
    with pytest.raises(DecisionConflictError, match="approve by bob"):
        HITL.submit(fork, uuid, HITLDecision.reject("no"), principal=Principal("eve", {"sre"}))
    r = agent(policy).prompt().session(fork).call()
    assert r.content == "Done: deployed prod x1." and len(RAN) == 1
    assert loaded.hitl.tasks[0].votes[0].name == "alice"  # the original waits on


def test_a_quorum_approves_one_set_of_arguments_and_rejections_can_count() -> None:
    policy = ApprovalPolicy(approvals=2, rejections=2)
    s, uuid = paused(policy)
    ops = agent(policy)
    HITL.submit(s, uuid, HITLDecision.approve().modified_args({"replicas": 3}), principal=ALICE,
                agent=ops)  # fmt: skip
    with pytest.raises(DecisionRefusedError) as other:
        HITL.submit(s, uuid, HITLDecision.approve(), principal=BOB, agent=ops)
    assert other.value.rule == "same_arguments"
    HITL.submit(s, uuid, HITLDecision.reject("too many"), principal=BOB)  # 1 of 2 rejections
    assert uuid not in s.hitl.decisions
    assert HITL.progress(s, uuid).text == (  # type: ignore[union-attr]
        "1 of 2 approvals (alice, sre) — waiting for one more from anyone else; "
        "1 of 2 rejections (bob, sre)"
    )
    record = HITL.submit(s, uuid, HITLDecision.approve().modified_args({"replicas": 3}),
                         principal=CAROL, agent=ops)  # fmt: skip
    assert record.verdict == "approve" and record.modified_args == {"replicas": 3}  # type: ignore[union-attr]
    ops.prompt().session(s).call()
    assert RAN == [{"env": "prod", "replicas": 3}]


def test_a_decision_in_nobody_s_name_cannot_count() -> None:
    s, uuid = paused(ApprovalPolicy(approvals=2))
    with pytest.raises(ReviewerNotAllowedError) as caught:
        HITL.submit(s, uuid, HITLDecision.approve())
    assert caught.value.rule == "anonymous"


def test_a_resume_voids_a_decision_its_own_policy_does_not_allow() -> None:
    """A hand-edited row (one approval recorded as the outcome of a two-approval policy, or
    a policy taken out of the task) is not applied by the agent whose policy asks for two:
    the call waits again, and nothing ran."""
    policy = ApprovalPolicy(roles={"sre"}, approvals=2)
    s, uuid = paused(policy)
    lax = s.hitl.tasks[0].model_copy(update={"policy": None})
    s.hitl.tasks[0] = lax  # the row as an attacker left it
    HITL.submit(s, uuid, HITLDecision.approve(), principal=ALICE)  # (judged by no policy)
    assert uuid in s.hitl.decisions
    agent(policy).prompt().session(s).call()
    assert RAN == [] and s.is_pending and uuid not in s.hitl.decisions
    assert s.hitl.tasks[0].policy == policy  # the code's policy judges it again


def test_progress_words_are_one_function() -> None:
    p = ApprovalPolicy(roles={"sre", "dba"}, approvals=3, not_requester=True)
    votes = [Vote(verdict="approve", name="alice", roles=["sre"], time_ms=1.0)]
    assert progress_text(p, votes, requester=CAROL) == (
        "1 of 3 approvals (alice, sre) — waiting for 2 more from dba or sre (not carol, who asked)"
    )
    assert progress_text(None, []) == "waiting for an approval from anyone"
    assert progress_text(p, votes, outcome="approve") == "approved by alice"


def test_a_snapshot_from_before_policies_loads_and_resumes_as_it_did() -> None:
    text = OLD.read_text().strip()
    s = InMemoryAgentSession.restore(text)
    assert s.to_json() == text  # canonical: nothing added to an old snapshot
    (record,) = s.hitl.decisions.values()
    assert (record.reviewer, record.via, record.authenticated, record.votes) == (
        "alice", None, False, []
    )  # fmt: skip
    assert s.requester is None and s.hitl.tasks[0].policy is None
    r = build_ops_agent().prompt().session(s).call()
    assert r.content == "Done: user 1001 deleted."


def test_a_session_without_a_policy_stores_nothing_new() -> None:
    s, uuid = paused(None, who=None)
    text = s.to_json()
    for key in ('"requester"', '"policy"', '"votes"', '"via"', '"approval_keys"', '"due_ms"'):
        assert key not in text
    HITL.submit(s, uuid, HITLDecision.approve().reviewer("alice"))
    assert '"votes"' not in s.to_json() and '"roles"' not in s.to_json()


def test_refusals_reach_the_store_s_audit_trail_through_decide_and_resume() -> None:
    store = MemoryStore()
    policy = ApprovalPolicy(roles={"sre"}, not_requester=True)
    s, uuid = paused(policy, who=Principal("carol", {"sre"}))
    store.save(s)
    row = store.raw_row("s")
    for who in (Principal("carol", {"sre"}), Principal("dan", {"dev"})):
        with pytest.raises(ReviewerNotAllowedError):  # (the session's own agent: its policy)
            decide_and_resume(store, "s", lambda x: HITL.submit(x, uuid, HITLDecision.approve()),
                              agent(policy), principal=who)  # fmt: skip
    assert store.raw_row("s") == row  # nothing changed ...
    refused = [r for r in store.audit("s") if r.action == "decision.refused"]
    assert [(r.actor, r.detail["rule"], r.target) for r in refused] == [  # ... but who tried
        ("carol", "not_requester", uuid),
        ("dan", "roles", uuid),
    ]
    assert store.verify_audit("s")
