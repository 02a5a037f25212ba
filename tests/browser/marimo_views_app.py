"""A marimo page for the browser tests: a History of the change graph paused at its
approval (fork, then decide the fork), and a Stepper over a small graph."""

import marimo

__generated_with = "0.25.2"
app = marimo.App()


@app.cell
def _():
    import marimo as mo

    from intermission import END, GraphSpec, InMemoryAgentSession
    from intermission.examples import build_change_graph
    from intermission.notebook import History, Stepper, settings

    settings.reviewer = "alice"
    team = build_change_graph(checkpoints="node")  # a checkpoint at every node
    session = InMemoryAgentSession.of("change-001")
    team.prompt("Upgrade the order service").session(session).call()
    history = mo.ui.anywidget(History(team, session))
    history
    return END, GraphSpec, Stepper, history, mo


@app.cell
def _(history, mo):
    current = history.value["outcome"].get("current")
    said = "no fork yet"
    if current is not None:
        verdicts = " ".join(d["verdict"] for d in current["decisions"])
        said = f"{current['session_id']} {current['status']} {verdicts}".strip()
    mo.md(f"FORK: {said}")
    return


@app.cell
def _(END, GraphSpec, Stepper, mo):
    spec = GraphSpec("steps")
    spec.add_start().link_add("a")
    spec.add_activity("a").task(lambda ctx, node: ctx.put("a", 1)).link_add("b")
    spec.add_activity("b").task(lambda ctx, node: ctx.put("b", 1)).link_add(END)
    spec.add_end()
    stepper = mo.ui.anywidget(Stepper(spec))
    stepper
    return


if __name__ == "__main__":
    app.run()
