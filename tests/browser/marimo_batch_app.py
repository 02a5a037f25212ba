"""A marimo page for the browser tests: an agent paused before a batch of two ``pay`` calls
and an HITLPanel on it. The tool appends a line to the file ``$IM_TOOL_LOG`` (its own
record, counted by the test)."""

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
    from intermission.notebook import HITLPanel

    run = uuid.uuid4().hex[:12]  # this page's token: the tool writes it

    @tool
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        with open(os.environ["IM_TOOL_LOG"], "a") as log:
            log.write(f"{run} {to} {amount}\n")
        return f"paid {amount} to {to}"

    calls = [
        ToolCall("pay", {"to": "ann", "amount": 1}),
        ToolCall("pay", {"to": "bo", "amount": 2}),
    ]
    model = ScriptedModel([calls, "done"])
    agent = (
        ReActAgent.of(model)
        .name("payer")
        .tools(pay)
        .interceptor(HITLInterceptor().on_tool("pay"))
        .build()
    )
    session = InMemoryAgentSession.of(f"batch-{run}")
    agent.prompt("pay both").session(session).call()
    panel = mo.ui.anywidget(HITLPanel(agent, session, reviewer="alice"))
    mo.vstack([mo.md(f"RUN: {run}"), panel])
    return


if __name__ == "__main__":
    app.run()
