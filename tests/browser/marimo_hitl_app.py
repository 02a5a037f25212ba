"""A marimo page for the browser tests: the ops agent paused before ``delete_user``, whose
tool appends a line to the file ``$IM_TOOL_LOG`` (its own record, counted by the test), an
HITLPanel, and a cell that reads the panel's value. The model asks for a hard delete (an
argument a reviewer may want gone)."""

import marimo

__generated_with = "0.25.2"
app = marimo.App()


@app.cell
def _():
    import os
    import uuid

    import marimo as mo

    from intermission import (
        HITLInterceptor,
        InMemoryAgentSession,
        ReActAgent,
        ScriptedModel,
        ToolCall,
        tool,
    )

    run = uuid.uuid4().hex[:12]  # this page's token: the tool writes it

    @tool
    def delete_user(user_id: int, hard: bool = False) -> str:
        """Delete a user account (``hard``: with its backups)."""
        with open(os.environ["IM_TOOL_LOG"], "a") as log:
            log.write(f"{run} {user_id} hard={hard}\n")
        return f"user {user_id} deleted"

    model = ScriptedModel(
        [[ToolCall("delete_user", {"user_id": 1001, "hard": True})], "User 1001 has been deleted."]
    )
    agent = (
        ReActAgent.of(model)
        .name("ops")
        .tools(delete_user)
        .interceptor(HITLInterceptor().on_tool("delete_user"))
        .build()
    )
    session = InMemoryAgentSession.of(f"marimo-{run}")
    agent.prompt("Please delete user 1001").session(session).call()
    mo.md(f"RUN: {run}")
    return agent, mo, session


@app.cell
def _(agent, mo, session):
    from intermission.notebook import HITLPanel

    panel = mo.ui.anywidget(HITLPanel(agent, session, reviewer="alice"))
    panel
    return (panel,)


@app.cell
def _(mo, panel):
    outcome = panel.value["outcome"]
    said = "not decided yet"
    if not outcome["pending"]:
        verdicts = " ".join(d["verdict"] for d in outcome["decisions"])
        said = f"{outcome['status']} {verdicts} · {outcome['answer']}"
    mo.md(f"OUTCOME: {said}")
    return


if __name__ == "__main__":
    app.run()
