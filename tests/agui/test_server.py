"""The AG-UI server (issue 22, R52), driven as a client would: ``python -m intermission
serve`` in a subprocess, the real ``@ag-ui/client`` HttpAgent from Node, and raw HTTP for
the clients that break the rules. Every event read back is validated against
``ag_ui.core`` (tests/agui/_server.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import need_module

need_module("ag_ui", "the agui extra (pip install 'intermission[agui]')")
need_module("httpx", "httpx")

from intermission.decisions import fingerprint  # noqa: E402
from intermission.stores import SQLiteStore  # noqa: E402

from ._server import Server, effects, types  # noqa: E402
from .agents import outlast_hasty  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    tmp = tmp_path_factory.mktemp("agui")
    db, log = tmp / "store.db", tmp / "effects.log"
    server = Server(str(db), log)
    yield server, db, log
    server.stop()


def tid() -> str:
    return "t-" + uuid.uuid4().hex[:12]


def start(server: Server, agent: str, thread: str, text: str = "go") -> list[tuple[str, Any]]:
    return server.run(
        agent,
        {
            "threadId": thread,
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": text}],
        },
    )


def interrupts_of(events: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    finished = [e for _, e in events if e["type"] == "RUN_FINISHED"]
    assert finished and finished[-1]["outcome"]["type"] == "interrupt", events
    return list(finished[-1]["outcome"]["interrupts"])


def resume(ids: list[str], payload: Any, reviewer: str | None = None) -> list[dict[str, Any]]:
    meta = {"metadata": {"reviewer": reviewer}} if reviewer else {}
    return [{"interruptId": i, "status": "resolved", "payload": payload, **meta} for i in ids]


def error_of(events: list[tuple[str, Any]]) -> dict[str, Any]:
    assert types(events)[-1] == "RUN_ERROR", types(events)
    return events[-1][1]


def stored(db: Path, thread: str) -> str:
    store = SQLiteStore(db)
    try:
        return store.load(thread).to_json()
    finally:
        store.close()


# -- the real JavaScript client ---------------------------------------------------------


def test_js_client_pauses_on_the_interrupt_and_resumes_it(world: Any) -> None:
    server, _, log = world
    thread = tid()
    out = server.js(
        thread,
        [
            {"runId": "r1", "user": "delete user 1001"},
            {"runId": "r2", "resumeAll": {"approved": True}, "metadata": {"reviewer": "ann"}},
        ],
    )
    first, second = out["steps"]
    assert first["error"] is None
    assert first["types"] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert first["outcome"] == "interrupt"
    (interrupt,) = first["events"][-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == interrupt["id"]
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert first["pending"] == [interrupt["id"]]
    # the resumed run reports the original call's result: no new TOOL_CALL_START
    assert second["error"] is None and second["pending"] == []
    assert "TOOL_CALL_START" not in second["types"]
    result = next(e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["id"] and result["content"] == "user 1001 deleted"
    assert second["types"][-1] == "RUN_FINISHED" and second["outcome"] == "success"
    assert effects(log, thread) == ["delete_user 1001"]
    tool_msgs = [m for m in out["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_msgs] == [interrupt["id"]]
    decided = server.get(f"/threads/{thread}")["decisions"]
    assert [(d["interruptId"], d["approved"], d["reviewer"]) for d in decided] == [
        (interrupt["id"], True, "ann")
    ]


def test_js_client_and_server_both_refuse_a_run_without_resume(world: Any) -> None:
    server, db, _ = world
    thread = tid()
    out = server.js(thread, [{"runId": "r1", "user": "go"}, {"runId": "r2", "user": "again"}])
    assert "pending interrupt" in out["steps"][1]["error"]  # the client's own check
    before = stored(db, thread)
    # a client that does not check: the server refuses, nothing changes
    events = server.run(
        "ops",
        {
            "threadId": thread,
            "runId": "r3",
            "messages": [{"id": "u", "role": "user", "content": "again"}],
        },
    )
    err = error_of(events)
    assert err["code"] == "INTERRUPTS_OPEN" and out["steps"][0]["pending"][0] in err["message"]
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert stored(db, thread) == before


# -- rule-breaking clients (raw HTTP) ---------------------------------------------------


def test_replaying_the_same_resume_has_one_effect_and_the_same_outcome(world: Any) -> None:
    server, _, log = world
    thread = tid()
    (i,) = interrupts_of(start(server, "ops", thread))
    body = {"threadId": thread, "resume": resume([i["id"]], {"approved": True}, "ann")}
    first = server.run("ops", {**body, "runId": "r2"})
    again = server.run("ops", {**body, "runId": "r3"})
    assert types(first)[-1] == "RUN_FINISHED" and types(again) == types(first)
    assert [e for _, e in again][1:-1] == [e for _, e in first][1:-1]
    assert again[-1][1]["runId"] == "r3"
    assert effects(log, thread) == ["delete_user 1001"]


def test_a_conflicting_resume_from_a_second_client_names_who_decided(world: Any) -> None:
    server, db, log = world
    thread = tid()
    out = server.js(
        thread,
        [
            {"runId": "r1", "user": "go"},
            {"runId": "r2", "resumeAll": {"approved": True}, "metadata": {"reviewer": "ann"}},
        ],
    )
    iid = out["steps"][0]["pending"][0]
    before = stored(db, thread)
    events = server.run(
        "ops",
        {
            "threadId": thread,
            "runId": "r3",
            "resume": resume([iid], {"approved": False, "reason": "no"}, "bob"),
        },
    )
    err = error_of(events)
    assert err["code"] == "DECISION_CONFLICT"
    assert "approved by ann at 20" in err["message"] and iid in err["message"]
    assert stored(db, thread) == before
    assert effects(log, thread) == ["delete_user 1001"]


def test_a_partial_resume_of_two_open_interrupts_is_refused(world: Any) -> None:
    server, db, log = world
    thread = tid()
    found = interrupts_of(start(server, "pair", thread))
    assert len(found) == 2
    before = stored(db, thread)
    err = error_of(
        server.run(
            "pair",
            {
                "threadId": thread,
                "runId": "r2",
                "resume": resume([found[0]["id"]], {"approved": True}),
            },
        )
    )
    assert err["code"] == "PARTIAL_RESUME" and found[1]["id"] in err["message"]
    assert stored(db, thread) == before and effects(log, thread) == []
    # approve one, reject the other with a reason: one resume covers both
    both = [
        {"interruptId": found[0]["id"], "status": "resolved", "payload": {"approved": True}},
        {
            "interruptId": found[1]["id"],
            "status": "resolved",
            "payload": {"approved": False, "reason": "not this one"},
        },
    ]
    events = server.run("pair", {"threadId": thread, "runId": "r3", "resume": both})
    assert types(events)[-1] == "RUN_FINISHED"
    assert effects(log, thread) == ["delete_user 7"]


@pytest.mark.parametrize(
    "payload",
    [
        {"approved": "yes"},
        {"approved": 1},
        {},
        None,
        [True],
        {"approved": True, "sudo": True},
        {"approved": False, "reason": "x", "editedArgs": {"user_id": 2}},
        {"approved": True, "editedArgs": ["user_id", 2]},
        {"approved": True, "editedArgs": {"user_id": "not a number"}},
        {"approved": True, "editedArgs": {"no_such_arg": 1}},
        {"approved": True, "reason": "x" * 5000},
    ],
)
def test_a_schema_breaking_payload_is_refused_and_changes_nothing(world: Any, payload: Any) -> None:
    server, db, log = world
    thread = tid()
    (i,) = interrupts_of(start(server, "ops", thread))
    before = stored(db, thread)
    err = error_of(
        server.run("ops", {"threadId": thread, "runId": "r2", "resume": resume([i["id"]], payload)})
    )
    assert err["code"] == "INVALID_PAYLOAD", err
    assert "Traceback" not in err["message"]
    assert stored(db, thread) == before and effects(log, thread) == []


@pytest.mark.parametrize("payload", [{"approved": False}, {"approved": False, "reason": "  "}])
def test_a_rejection_without_a_reason_is_refused_as_everywhere(world: Any, payload: Any) -> None:
    server, db, log = world
    thread = tid()
    (i,) = interrupts_of(start(server, "ops", thread))
    before = stored(db, thread)
    err = error_of(
        server.run("ops", {"threadId": thread, "runId": "r2", "resume": resume([i["id"]], payload)})
    )
    assert err["code"] == "DECISION_REFUSED" and "needs a reason" in err["message"], err
    assert stored(db, thread) == before and effects(log, thread) == []


def test_edited_arguments_go_through_modified_args(world: Any) -> None:
    server, db, log = world
    thread = tid()
    (i,) = interrupts_of(start(server, "ops", thread))
    events = server.run(
        "ops",
        {
            "threadId": thread,
            "runId": "r2",
            "resume": resume([i["id"]], {"approved": True, "editedArgs": {"user_id": 2002}}, "ann"),
        },
    )
    result = next(e for _, e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "user 2002 deleted"
    assert effects(log, thread) == ["delete_user 2002"]
    store = SQLiteStore(db)
    try:
        (decided,) = [e.decision for e in store.load(thread).events if e.kind == "hitl_decided"]
    finally:
        store.close()
    assert decided.modified_args == {"user_id": 2002} and decided.reviewer == "ann"
    # the args the reviewer saw are what the decision's fingerprint names
    assert decided.fingerprint == fingerprint(i["metadata"]["intermission"]["args"])


def test_an_expired_interrupt_is_refused_and_changes_nothing(world: Any) -> None:
    server, db, log = world
    thread = tid()
    (i,) = interrupts_of(start(server, "hasty", thread))
    assert i["expiresAt"].endswith("Z")
    outlast_hasty()
    before = stored(db, thread)
    err = error_of(
        server.run(
            "hasty",
            {"threadId": thread, "runId": "r2", "resume": resume([i["id"]], {"approved": True})},
        )
    )
    assert err["code"] == "INTERRUPT_EXPIRED" and i["expiresAt"] in err["message"]
    assert stored(db, thread) == before and effects(log, thread) == []


def test_unknown_and_duplicate_ids_and_unknown_threads_are_refused(world: Any) -> None:
    server, db, _ = world
    thread = tid()
    (i,) = interrupts_of(start(server, "ops", thread))
    before = stored(db, thread)
    ok = {"approved": True}
    cases = [
        (thread, resume(["not-an-interrupt"], ok), "UNKNOWN_INTERRUPT"),
        (thread, resume([i["id"], i["id"]], ok), "DUPLICATE_INTERRUPT"),
        (tid(), resume([i["id"]], ok), "THREAD_NOT_FOUND"),
    ]
    for thread_id, entries, code in cases:
        err = error_of(server.run("ops", {"threadId": thread_id, "runId": "rx", "resume": entries}))
        assert err["code"] == code, err
    # the interrupt of this thread, resumed through another thread of another agent
    other = tid()
    interrupts_of(start(server, "pair", other))
    err = error_of(
        server.run("pair", {"threadId": other, "runId": "ry", "resume": resume([i["id"]], ok)})
    )
    assert err["code"] == "UNKNOWN_INTERRUPT"
    err = error_of(
        server.run("pair", {"threadId": thread, "runId": "rz", "resume": resume([i["id"]], ok)})
    )
    assert err["code"] == "WRONG_AGENT"
    assert stored(db, thread) == before


def test_a_graph_approval_is_a_confirmation_interrupt(world: Any) -> None:
    server, _, log = world
    thread = tid()
    events = start(server, "change", thread, "Upgrade the order service")
    kinds = types(events)
    assert kinds.count("STEP_STARTED") == kinds.count("STEP_FINISHED") > 0
    assert kinds[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    (i,) = interrupts_of(events)
    assert i["reason"] == "confirmation" and "order-service" in i["message"]
    listed = [x for x in server.get("/interrupts")["interrupts"] if x["threadId"] == thread]
    assert [x["interrupt"]["id"] for x in listed] == [i["id"]]
    before = len(effects(log, "graph"))
    done = server.run(
        "change",
        {"threadId": thread, "runId": "r2", "resume": resume([i["id"]], {"approved": True}, "cab")},
    )
    assert types(done)[-1] == "RUN_FINISHED" and done[-1][1]["outcome"]["type"] == "success"
    assert len(effects(log, "graph")) == before + 1
    again = server.run(
        "change",
        {"threadId": thread, "runId": "r3", "resume": resume([i["id"]], {"approved": True}, "cab")},
    )
    assert types(again) == types(done) and len(effects(log, "graph")) == before + 1
    err = error_of(
        server.run(
            "change",
            {
                "threadId": thread,
                "runId": "r4",
                "resume": resume([i["id"]], {"approved": False, "reason": "late"}, "dan"),
            },
        )
    )
    assert err["code"] == "DECISION_CONFLICT" and "approved by cab" in err["message"]


# -- reconnecting: Last-Event-ID --------------------------------------------------------


def test_last_event_id_replays_exactly_what_was_missed(world: Any) -> None:
    server, _, _ = world
    thread = tid()
    live = start(server, "ops", thread)
    (i,) = interrupts_of(live)
    live += server.run(
        "ops", {"threadId": thread, "runId": "r2", "resume": resume([i["id"]], {"approved": True})}
    )
    ids = [x for x, _ in live]
    assert len(set(ids)) == len(ids)
    assert server.replay(thread) == live
    for cut in (1, 3, len(live) // 2, len(live) - 1):
        assert server.replay(thread, ids[cut - 1]) == live[cut:]
    assert server.replay(thread, ids[-1]) == []
    assert server.replay(thread, "garbage") == live  # not one of ours: everything


# -- hostile input and the token --------------------------------------------------------


def test_hostile_requests_get_a_4xx_never_a_traceback(world: Any) -> None:
    import httpx

    server, _, _ = world
    url = f"{server.url}/agents/ops"
    cases = [
        (b"{", 422),
        (b"[]", 422),
        (json.dumps({"threadId": "x"}).encode(), 422),
        (json.dumps({"threadId": 5, "runId": "r", "messages": []}).encode(), 422),
        (json.dumps({"threadId": "a\u0000b", "runId": "r", "messages": []}).encode(), 422),
        (json.dumps({"threadId": "x" * 500, "runId": "r", "messages": []}).encode(), 422),
        (
            json.dumps({"threadId": "t", "runId": "r", "messages": [{"role": "wizard"}]}).encode(),
            422,
        ),
        (b"x" * 2_000_000, 413),
    ]
    for body, status in cases:
        r = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=60)
        assert r.status_code == status, (body[:80], r.status_code, r.text)
        assert "Traceback" not in r.text and r.json()["error"]
    r = httpx.post(f"{server.url}/agents/nobody", json={}, timeout=60)
    assert r.status_code == 404 and "Traceback" not in r.text
    assert httpx.get(f"{server.url}/threads/nope/events", timeout=60).status_code == 404


def test_with_a_token_every_route_needs_the_bearer(tmp_path: Path) -> None:
    import httpx

    server = Server(str(tmp_path / "s.db"), tmp_path / "e.log", token="s3cret")
    try:
        body = {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": "go"}],
        }
        for auth in (None, "Bearer wrong", "s3cret", "Basic s3cret"):
            headers = {"Authorization": auth} if auth else {}
            for method, path in (
                ("POST", "/agents/ops"),
                ("GET", "/interrupts"),
                ("GET", "/decided"),
                ("GET", "/threads/t"),
                ("GET", "/threads/t/events"),
            ):
                r = httpx.request(
                    method,
                    server.url + path,
                    json=body if method == "POST" else None,
                    headers=headers,
                    timeout=60,
                )
                assert r.status_code == 401, (auth, path, r.status_code)
        assert effects(tmp_path / "e.log", "t") == []
        assert SQLiteStore(tmp_path / "s.db").pending() == []
        # the console page is static (no data in it): it asks for the token and sends it
        page = httpx.get(server.url + "/", timeout=60)
        assert page.status_code == 200 and 'type="password"' in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
        events = server.run("ops", body)  # with the bearer
        assert interrupts_of(events)
        assert len(server.get("/interrupts")["interrupts"]) == 1
    finally:
        server.stop()


def test_serve_binds_127_0_0_1_unless_told_otherwise() -> None:
    from intermission.cli import build_parser

    args = build_parser().parse_args(["serve", "--agents", "m:A"])
    assert (args.host, args.port, args.token, args.agents) == ("127.0.0.1", 8000, None, "m:A")
    args = build_parser().parse_args(["--agents", "m:B", "serve"])
    assert args.agents == "m:B"


def test_js_client_sees_a_model_that_failed_for_good_and_asks_it_again(world: Any) -> None:
    """A model call that failed after its retries ends the request abnormally and keeps it
    resumable. Before, over AG-UI: ``RUN_FINISHED {outcome: success}`` with no text (the
    real client reported success), and the request could never be asked again — re-sending
    the history, or a run with no message, was ``NO_PROMPT``: the user's request was lost."""
    server, _, _ = world
    thread = tid()
    out = server.js(thread, [{"runId": "r1", "user": thread}, {"runId": "r2"}], agent="flaky")
    failed, again = out["steps"]
    assert failed["outcome"] is None and failed["types"] == ["RUN_STARTED", "RUN_ERROR"]
    assert failed["runError"]["code"] == "ModelCallError"
    assert "refused the connection" in failed["runError"]["message"]
    assert "a run without a new message asks the model again" in failed["runError"]["message"]
    # the same client runs again (it re-sends its history): the kept request is asked again
    assert again["error"] is None and again["outcome"] == "success", again
    answer = [m for m in out["messages"] if m["role"] == "assistant"]
    assert answer[-1]["content"] == f"answer to {thread}"
    assert server.get(f"/threads/{thread}")["status"] == "done"
    # and a replay of the failed run ends as the live one did
    logged = [e for _, e in server.replay(thread)]
    assert [e["type"] for e in logged].count("RUN_ERROR") == 1
