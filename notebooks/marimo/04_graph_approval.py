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
    # 4 · Graph approval in marimo: the change graph, live

    > **Opening this page in marimo's editor** (`make marimo`): it runs as it opens — this
    > repository's `pyproject.toml` sets marimo's `auto_instantiate`. If the cells show as
    > stale (greyed, nothing below them), press **Run** (▶ at the bottom right, or
    > Ctrl/Cmd-Shift-R) once. `marimo run FILE` shows it as an app, already run.

    A team graph proposes a change, waits for a human, then executes it — or finishes with
    the rejection:

    ```
    proposal_agent → approval → approval_route ─ APPROVE → executor_agent → end
                                               └ otherwise → reject_finish → end
    ```

    The `approval` node only **checks** the decision; with none it records
    `approval.request` and calls `session.pending(True, reason)`. Waiting for a human blocks
    no thread: the state is kept, the request ends, and a later request with an empty
    `prompt()` continues.
    """)
    return


@app.cell
def _():
    from intermission import InMemoryAgentSession
    from intermission.examples import build_change_graph

    def paused_change(session_id="change-001"):
        """The change graph, paused at its approval; ``applied`` records the effect."""
        applied = []

        def apply_change(change_id):
            applied.append(change_id)  # the external side effect
            return f"applied {change_id}"

        team = build_change_graph(apply_change)
        session = InMemoryAgentSession.of(session_id)
        team.prompt("Upgrade the order service and migrate the database").session(session).call()
        return team, session, applied

    return (paused_change,)


@app.cell
def _(mo, paused_change):
    team, session, applied = paused_change()
    mo.md(
        f"pending: **{session.is_pending}** · {session.pending_reason} · request: "
        f"*{session.context.get('approval.request')}*"
    )
    return applied, session, team


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## The graph, with live state

    Visited nodes are green, the pending node is orange with its reason, links taken so far
    are bold. Graphviz's `dot` draws it, offline.
    """)
    return


@app.cell
def _(session, team):
    from intermission.notebook import GraphView

    GraphView(team, session)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Decide in the widget

    **👉 Approve**, or type a **Reason** and click Reject (Reject stays disabled until there is
    a reason). Your name comes from the Reviewer field; a comment is optional. The button
    writes `approval.decision`, `approval.operator`, `approval.time` (and
    `approval.reason`/`approval.comment`) into the session, records who decided in the
    timeline, and resumes the team in the background; the result, the redrawn graph and the
    timeline appear in the widget, and the cell below it runs again by itself.
    """)
    return


@app.cell
def _(mo, session, team):
    from intermission.notebook import ApprovalWidget, settings

    settings.reviewer = "alice"  # who decides on this page (unset: your OS user name)
    widget = mo.ui.anywidget(ApprovalWidget(team, session))
    widget
    return ApprovalWidget, widget


@app.cell
def _(applied, mo, widget):
    def describe(outcome, effects):
        """What the approval came to, as the page says it."""
        if outcome["pending"]:
            return "**Not decided yet**: Approve, or Reject with a reason, above."
        (decision,) = outcome["decisions"]
        why = f" ({decision['reason']})" if decision["reason"] else ""
        return (
            f"**{outcome['status']}** · {decision['verdict']}{why} by {decision['reviewer']} · "
            f"*{outcome['answer']}* · effects run: `{effects}`"
        )

    mo.md(describe(widget.value["outcome"], applied))  # re-runs when the decision lands
    return (describe,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Why the approval node runs twice

    Positions are recorded when a node is **entered**, before its task. The resume therefore
    runs the pending node's task again — that is why the gate only checks the decision and
    never does the work itself. The executor's effect goes through
    `session.once("change-001/execute", …)`, an idempotency ledger kept in the session, so
    resuming again can never repeat it. The tests below check both paths on fresh sessions.
    """)
    return


@app.cell
def _(ApprovalWidget, describe, mo, paused_change):
    def test_approve_applies_the_change_once():
        team, session, applied = paused_change()
        widget = mo.ui.anywidget(ApprovalWidget(team, session, reviewer="alice"))
        widget.widget.click("approve", comment="maintenance window confirmed")
        widget.widget.click("approve")  # a second click while the first resumes: ignored
        assert widget.widget.wait().content == "Change executed: applied change-001"
        assert applied == ["change-001"]
        assert session.context.trace.graphs["change"].visited["approval"] == 2
        assert session.once("change-001/execute", lambda: "twice") == "applied change-001"
        said = describe(widget.value["outcome"], applied)
        assert said.startswith("**done** · APPROVE by alice")

    def test_reject_needs_a_reason_and_changes_nothing_without_one():
        team, session, applied = paused_change("change-002")
        widget = ApprovalWidget(team, session, reviewer="bob")
        widget.click("reject")  # the page greys Reject without a reason; in code it is refused
        assert "needs a reason" in widget.status and session.is_pending
        widget.click("reject", reason="no rollback plan")
        assert widget.wait().content == "Change rejected: no rollback plan" and applied == []
        said = describe(widget.outcome, applied)
        assert said.startswith("**done** · REJECT (no rollback plan) by bob")

    return


if __name__ == "__main__":
    app.run()
