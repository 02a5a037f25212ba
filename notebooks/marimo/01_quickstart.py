import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    return (mo,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    # 1 · Quickstart in marimo: an agent that asks before it acts

    > **Opening this page in marimo's editor** (`make marimo`): it runs as it opens — this
    > repository's `pyproject.toml` sets marimo's `auto_instantiate`. If the cells show as
    > stale (greyed, nothing below them), press **Run** (▶ at the bottom right, or
    > Ctrl/Cmd-Shift-R) once. `marimo run FILE` shows it as an app, already run.

    `intermission` runs agents whose sessions can **pause for a human** and **resume later**.
    Here a ReAct agent wants to call `delete_user`; an `HITLInterceptor` stops the run *before*
    the tool runs, you approve in a widget, and the same session goes on.

    Everything on this page runs offline with `ScriptedModel`, the deterministic model that
    ships with the package. The last cell holds tests: `pytest` on this file runs them.
    """)
    return


@app.cell
def _():
    from intermission import (
        HITL,
        HITLInterceptor,
        InMemoryAgentSession,
        ReActAgent,
        ScriptedModel,
        ToolCall,
        tool,
    )

    def paused_agent():
        """The page's agent, and its session paused before the tool runs."""
        deleted = []  # the tool's own record of what it did

        @tool
        def delete_user(user_id: int) -> str:
            """Delete a user account (irreversible)."""
            deleted.append(user_id)
            return f"user {user_id} deleted"

        model = ScriptedModel(
            [[ToolCall("delete_user", {"user_id": 1001})], "User 1001 has been deleted."]
        )
        agent = (
            ReActAgent.of(model)
            .name("ops")
            .tools(delete_user)
            .interceptor(HITLInterceptor().on_tool("delete_user"))
            .build()
        )
        session = InMemoryAgentSession.of("quickstart-1")
        agent.prompt("Please delete user 1001").session(session).call()
        return agent, session, deleted

    return HITL, paused_agent


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Ask

    The model proposes `delete_user(1001)`. The interceptor suspends the whole tool batch
    before anything runs: the session is **pending**, the reason is kept, and `call()`
    returns. The pending call is an `HITLTask` keyed by its **call UUID**.
    """)
    return


@app.cell
def _(HITL, mo, paused_agent):
    agent, session, deleted = paused_agent()
    (task,) = HITL.pending_tasks(session)
    mo.md(
        f"pending: **{session.is_pending}** · reason: *{session.pending_reason}* · "
        f"task: `{task.tool_name}({task.args})` · tool ran: `{deleted}`"
    )
    return agent, deleted, session


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Approve

    The panel shows one row per pending call, with editable arguments, your name as reviewer,
    a comment and a reason (a rejection needs one). It is an `HITLPanel` wrapped by
    `mo.ui.anywidget`: the same widget as in JupyterLab.

    **👉 Click Approve** (or type a reason and click Reject). The decision is written and the
    agent resumes in the background; the panel shows the result, and the cell below it runs
    again by itself, because it reads the panel's value.
    """)
    return


@app.cell
def _(agent, mo, session):
    from intermission.notebook import HITLPanel, settings

    settings.reviewer = "alice"  # who decides on this page (unset: your OS user name)
    panel = mo.ui.anywidget(HITLPanel(agent, session))
    panel
    return HITLPanel, panel


@app.cell
def _(deleted, mo, panel):
    def describe(outcome, ran):
        """What a decision came to, as the page says it."""
        if outcome["pending"]:
            return "**Not decided yet**: click Approve (or Reject, with a reason) above."
        (decision,) = outcome["decisions"]
        return (
            f"**{outcome['status']}** · {decision['verdict']} by {decision['reviewer']} · "
            f"answer: *{outcome['answer']}* · the tool ran for: `{ran}`"
        )

    mo.md(describe(panel.value["outcome"], deleted))  # re-runs when a decision lands
    return (describe,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## What happened

    The panel's timeline shows both requests: the first one ends waiting for a human, the
    resume starts with the recorded decision (who, when, comment) and replays **the same call
    UUID** — the model was not asked again. A double click decides once: the page sends one
    message, and Python ignores a second one while the first resume runs.

    The tests below build the same agent afresh and click the panel's buttons in code
    (`panel.widget.click(...)` sends what a button sends).
    """)
    return


@app.cell
def _(HITL, HITLPanel, describe, mo, paused_agent):
    def test_approve_runs_the_tool_once_and_the_next_cell_says_so():
        agent, session, deleted = paused_agent()
        (task,) = HITL.pending_tasks(session)
        panel = mo.ui.anywidget(HITLPanel(agent, session, reviewer="alice"))
        assert describe(panel.value["outcome"], deleted).startswith("**Not decided yet**")
        panel.widget.click("decide", call_uuid=task.call_uuid, verdict="approve")
        panel.widget.click("decide", call_uuid=task.call_uuid, verdict="approve")  # twice
        assert panel.widget.wait().content == "User 1001 has been deleted."
        assert deleted == [1001]  # once
        said = describe(panel.value["outcome"], deleted)
        assert said.startswith("**done** · APPROVE by alice") and "[1001]" in said

    def test_reject_needs_a_reason_and_runs_nothing():
        agent, session, deleted = paused_agent()
        (task,) = HITL.pending_tasks(session)
        panel = HITLPanel(agent, session, reviewer="alice")
        panel.click("decide", call_uuid=task.call_uuid, verdict="reject")  # no reason
        assert "needs a reason" in panel.status and session.is_pending
        panel.click("decide", call_uuid=task.call_uuid, verdict="reject", reason="wrong user")
        assert panel.wait().content == "wrong user" and deleted == []
        assert panel.outcome["decisions"][0]["verdict"] == "REJECT"

    return


if __name__ == "__main__":
    app.run()
