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
    # 5 · The Inbox in marimo: what waits for a human, decided from here or anywhere

    > **Opening this page in marimo's editor** (`make marimo`): it runs as it opens — this
    > repository's `pyproject.toml` sets marimo's `auto_instantiate`. If the cells show as
    > stale (greyed, nothing below them), press **Run** (▶ at the bottom right, or
    > Ctrl/Cmd-Shift-R) once. `marimo run FILE` shows it as an app, already run.

    A paused session is versioned JSON in a store — `SQLiteStore` on one machine,
    `PostgresStore` when many kernels and workers share one database. `Inbox(store, agents)`
    lists the pending sessions of a store, newest first, with the first one selected; it
    re-reads the list every few seconds and after every decision made in it. **Open** shows
    the widget that decides the session (an approval with its graph, or a panel of tool
    calls), wired to the store: the decision is saved, then the session resumes under a claim
    and is saved again — once, whoever else decides at the same moment.
    """)
    return


@app.cell
def _():
    import pathlib
    import tempfile

    from intermission import InMemoryAgentSession
    from intermission.examples import build_change_graph, build_ops_agent
    from intermission.stores import SQLiteStore

    def store_with_two_pending():
        """A fresh SQLite store holding a paused change graph and, newer, the ops agent
        paused before it deletes a user."""
        path = pathlib.Path(tempfile.mkdtemp(prefix="intermission-inbox-")) / "inbox.sqlite"
        store = SQLiteStore(path)
        change = InMemoryAgentSession.of("change-001")
        build_change_graph().prompt("Upgrade the order service").session(change).call()
        store.save(change)
        ops = InMemoryAgentSession.of("ops-1")
        build_ops_agent().prompt("Please delete user 1001").session(ops).call()
        store.save(ops)
        return store, path

    agents = {"change": build_change_graph, "ops": build_ops_agent}  # agents are code
    return agents, store_with_two_pending


@app.cell
def _(mo, store_with_two_pending):
    store, path = store_with_two_pending()
    mo.md(
        "Pending in the store: "
        + ", ".join(f"`{p.session_id}` ({p.agent}: {p.reason})" for p in store.pending())
    )
    return path, store


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## The inbox

    **👉 Pick `change-001`, click Open, then Approve** in the widget that appears below the
    table (or open `ops-1` and approve its tool call). The list shrinks, and the cell under
    the inbox runs again by itself: it reads the inbox's value.
    """)
    return


@app.cell
def _(agents, mo, store):
    from intermission.notebook import Inbox, settings

    settings.reviewer = "alice"  # who decides on this page (unset: your OS user name)
    inbox = mo.ui.anywidget(Inbox(store, agents))
    inbox
    return Inbox, inbox


@app.cell
def _(inbox, mo):
    def describe(outcome):
        """What the inbox holds now, and what the opened session came to."""
        waiting = ", ".join(outcome["pending"]) or "nothing"
        opened = outcome["opened"]
        if opened is None:
            return f"Waiting for a human: {waiting}. Nothing opened yet."
        if opened["pending"]:
            return f"Waiting for a human: {waiting}. `{opened['session_id']}`: not decided yet."
        verdicts = ", ".join(f"{d['verdict']} by {d['reviewer']}" for d in opened["decisions"])
        return (
            f"Waiting for a human: {waiting}. `{opened['session_id']}` is **{opened['status']}**"
            f" ({verdicts}): *{opened['answer']}*"
        )

    mo.md(describe(inbox.value["outcome"]))  # re-runs when a decision lands
    return (describe,)


@app.cell(hide_code=True)
def _(mo, path):
    mo.md(f"""
    ## Decide from anywhere

    The store is the one authority, so a decision made elsewhere shows here within seconds:
    run this in a terminal, then look at the inbox (or its opened widget, which says
    "Decided (not in this view): APPROVE by carol (you) at …" — the command decides as your
    operating-system user, and `--reviewer` is the display name it records with it):

    ```
    python -m intermission approve change-001 --reviewer carol --store {path}
    ```

    An `Inbox(store)` made without agents lists the sessions but cannot open one: it says
    which agent to give it. The tests below check all of this on fresh stores.
    """)
    return


@app.cell
def _(Inbox, agents, describe, mo, store_with_two_pending):
    def test_open_then_approve_decides_once_and_the_list_shrinks():
        store, _path = store_with_two_pending()
        inbox = mo.ui.anywidget(Inbox(store, agents, poll_s=None))
        assert inbox.widget.selected == "ops-1"  # the newest, preselected
        inbox.widget.click("open", session_id="change-001")  # what Open sends
        widget = inbox.widget.current
        widget.click("approve", reviewer="alice")
        assert widget.wait().content == "Change executed: applied change-001"
        assert [p.session_id for p in store.pending()] == ["ops-1"]
        said = describe(inbox.value["outcome"])
        assert said.startswith("Waiting for a human: ops-1. `change-001` is **done**")
        assert "APPROVE by alice" in said
        stored = store.load("change-001")
        assert stored.ledger["change-001/execute"].status == "completed"
        inbox.widget.close()
        store.close()

    def test_a_decision_made_elsewhere_shows_in_the_opened_widget():
        from intermission.cli import main as cli

        store, path = store_with_two_pending()
        inbox = Inbox(store, agents, poll_s=None)
        widget = inbox.open_session("change-001")
        from intermission.principals import os_principal

        assert cli(["approve", "change-001", "--reviewer", "carol", "--store", str(path)]) == 0
        assert widget.runner.sync()  # what the inbox's poll does every few seconds
        # the OS user decided; carol is the display name typed on the command line
        who = f"<b>carol ({os_principal().name})</b>"
        assert f"Decided <i>(not in this view)</i>: <b>APPROVE</b> by {who}" in widget.status
        widget.click("approve")  # a stale click: not recorded, and it says why
        assert f"Your Approve was not recorded: <b>APPROVE</b> by {who}" in widget.lost
        inbox.close()
        store.close()

    def test_an_inbox_without_agents_lists_but_says_what_it_needs_to_open():
        store, _path = store_with_two_pending()
        inbox = Inbox(store, poll_s=None)
        assert inbox.pending_ids == ["ops-1", "change-001"]
        inbox.click("open", session_id="ops-1")  # what Open sends: shown, nothing raised
        assert "made without agents" in inbox.status and inbox.current is None
        inbox.close()
        store.close()

    return


if __name__ == "__main__":
    app.run()
