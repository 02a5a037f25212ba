"""A marimo page for the browser tests: a deploy that needs two sre approvals, paused in a
SQLite store, and two HITLPanels on it — alice's and bob's. The tool appends a line to the
file ``$IM_TOOL_LOG`` (its own record, counted by the test)."""

import marimo

__generated_with = "0.25.2"
app = marimo.App()


@app.cell
def _():
    import os
    import pathlib
    import tempfile
    import uuid

    import marimo as mo

    from intermission import (
        ApprovalPolicy,
        HITLInterceptor,
        InMemoryAgentSession,
        Principal,
        ReActAgent,
        ScriptedModel,
        ToolCall,
        tool,
    )
    from intermission.notebook import HITLPanel
    from intermission.stores import SQLiteStore

    run = uuid.uuid4().hex[:12]  # this page's token: the tool writes it

    def make():
        @tool
        def deploy(env: str) -> str:
            """Deploy."""
            with open(os.environ["IM_TOOL_LOG"], "a") as log:
                log.write(f"{run} {env}\n")
            return f"deployed {env}"

        model = ScriptedModel([[ToolCall("deploy", {"env": "prod"})], "done"])
        policy = ApprovalPolicy(roles={"sre"}, approvals=2, asserted_ok=True)  # (one kernel)
        hitl = HITLInterceptor().on_tool("deploy", policy=policy)
        return ReActAgent.of(model).name("deploy").tools(deploy).interceptor(hitl).build()

    store = SQLiteStore(pathlib.Path(tempfile.mkdtemp()) / "quorum.sqlite")
    session = InMemoryAgentSession.of(f"q-{run}")
    make().prompt("deploy").session(session).call()
    store.save(session)
    sid = session.session_id
    mo.md(f"RUN: {run}")
    return HITLPanel, Principal, make, mo, sid, store


@app.cell
def _(HITLPanel, Principal, make, mo, sid, store):
    alice = mo.ui.anywidget(
        HITLPanel(make(), store.load(sid), store=store, principal=Principal("alice", {"sre"}))
    )
    alice
    return


@app.cell
def _(HITLPanel, Principal, make, mo, sid, store):
    bob = mo.ui.anywidget(
        HITLPanel(make(), store.load(sid), store=store, principal=Principal("bob", {"sre"}))
    )
    bob
    return


if __name__ == "__main__":
    app.run()
