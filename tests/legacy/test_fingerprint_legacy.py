"""Fingerprints earlier releases recorded are accepted for the very same agent only.

The expected values were recorded by the releases themselves (make_fixtures.py ran
a94f00a's and 6810089's code on tests/legacy/agents.py: fixtures.json keeps them), so they
check the reimplemented algorithms against the real ones, not against themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.legacy import agents

from intermission import (
    AgentMismatchError,
    HITLInterceptor,
    InMemoryAgentSession,
    ReActAgent,
    ScriptedModel,
    tool,
)
from intermission.agents._base import check_owner
from intermission.agents.fingerprint_legacy import earlier_fingerprints, matches_earlier

INDEX: dict[str, Any] = json.loads((Path(__file__).parent / "fixtures/fixtures.json").read_text())


def _recorded(name: str) -> str:
    fingerprint = INDEX[name]["fingerprint"]
    assert isinstance(fingerprint, str)
    return fingerprint


def test_the_first_algorithms_fingerprint_is_recognised() -> None:
    agent = agents.build_agent()
    old = _recorded("schema4")  # a94f00a: the algorithm of c447910/e860691
    assert old != agent.fingerprint
    assert matches_earlier(agent, old)
    assert _recorded("schema8") == agent.fingerprint  # 9e91bb5 has today's algorithm
    assert not matches_earlier(agent, agent.fingerprint)  # (today's is not an earlier one)


def test_another_agent_or_value_does_not_match() -> None:
    @tool
    def delete_user(user_id: int, hard: bool) -> str:
        """Another schema under the same name."""
        return "no"

    other = (
        ReActAgent.of(ScriptedModel(["x"]))
        .name(agents.AGENT_NAME)
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
        .build()
    )
    assert not matches_earlier(other, _recorded("schema4"))
    assert not matches_earlier(agents.build_agent(), "0123456789abcdef")
    assert not matches_earlier(agents.build_agent(), None)  # type: ignore[arg-type]


def test_earlier_fingerprints_are_cached_per_agent() -> None:
    agent = agents.build_agent()
    assert earlier_fingerprints(agent) is earlier_fingerprints(agent)


def _session_of(fingerprint: str) -> Any:
    session = InMemoryAgentSession.of("s")
    session.agent = agents.AGENT_NAME
    session.agent_fingerprint = fingerprint
    return session


def test_check_owner_takes_an_earlier_fingerprint_but_not_for_a_strict_agent() -> None:
    agent = agents.build_agent()
    check_owner(_session_of(_recorded("schema4")), agent)  # accepted
    with pytest.raises(AgentMismatchError):
        check_owner(_session_of("0123456789abcdef"), agent)
    strict = agents.build_agent()
    strict._strict_owner = True
    with pytest.raises(AgentMismatchError):
        check_owner(_session_of(_recorded("schema4")), strict)


def test_a_team_and_the_bundled_agent_match_their_first_fingerprints() -> None:
    """The values a94f00a's own code gives these definitions (PYTHONPATH=its src:
    ``build_change_graph().fingerprint``, ``build_ops_agent().fingerprint``)."""
    from intermission.examples import build_change_graph, build_ops_agent

    assert matches_earlier(build_change_graph(), "0bed53a07ad385ba")  # members too
    assert matches_earlier(build_ops_agent(), "9b69515d058dbf52")
