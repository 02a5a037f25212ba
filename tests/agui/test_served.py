"""What ``agui_app`` serves (R62): an AgentTable, a mapping listing versions, or today's
mapping of names to agents or factories — which agent runs a stored session, and what a
listing says of a session whose version is not served."""

from __future__ import annotations

from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")

from intermission import AgentTable, AgentVersionError, ReActAgent, ScriptedModel  # noqa: E402
from intermission.agui.served import Served  # noqa: E402
from intermission.core.session import InMemoryAgentSession  # noqa: E402
from intermission.errors import UsageError  # noqa: E402


def _ops(version: str, migrates: bool = False) -> Any:
    builder = ReActAgent.of(ScriptedModel(["ok"])).name("ops").version(version)
    if migrates:
        builder = builder.migrates_from("1", lambda s: None)
    return builder.build()


def _session(version: str | None) -> InMemoryAgentSession:
    s = InMemoryAgentSession("t")
    s.agent = "ops"
    s.agent_version = version
    return s


def test_a_table_runs_each_session_on_its_own_version_and_new_ones_on_the_newest() -> None:
    v1, v2 = _ops("1"), _ops("2")
    for agents in (AgentTable({"ops": [v1, v2]}), {"ops": [v1, v2]}):
        served = Served(agents)
        assert served.names() == ["ops"] and "ops" in served
        assert served.newest("ops") is v2
        assert served.for_session(_session("1")) is v1
        assert served.for_session(_session("2")) is v2
        assert served.describe(_session("1")) == {"version": "ops@1", "served": True}


def test_a_version_not_served_is_refused_and_listed_as_waiting() -> None:
    served = Served(AgentTable({"ops": [_ops("2")]}))
    with pytest.raises(AgentVersionError) as caught:
        served.for_session(_session("1"))
    assert "ops@1" in str(caught.value) and "ops@2" in str(caught.value)
    assert served.describe(_session("1")) == {
        "version": "ops@1", "served": False,
        "waiting": "waiting for ops@1, not served here (this server serves ops@2)",
    }  # fmt: skip
    assert Served(AgentTable({"ops": [_ops("2", migrates=True)]})).serves(_session("1"))


def test_a_plain_mapping_checks_the_version_of_each_run_s_own_instance() -> None:
    made: list[Any] = []

    def factory() -> Any:
        made.append(_ops("2"))
        return made[-1]

    served = Served({"ops": factory})
    assert len(made) == 1  # one instance tells the version (the listing's)
    fresh = served.newest("ops")
    assert served.for_session(_session("2"), fresh) is fresh and len(made) == 2
    with pytest.raises(AgentVersionError):
        served.for_session(_session("1"), fresh)
    assert served.describe(_session("1"))["served"] is False
    assert served.serves(_session(None))  # unversioned: the request's own check judges


def test_an_agent_served_under_another_name_is_refused() -> None:
    with pytest.raises(UsageError, match="serve it as 'ops'"):
        Served({"other": _ops("1")})
