"""Core never imports the optional layers (STYLE §1)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys

    BLOCKED = {
        "IPython", "ipywidgets", "graphviz", "psycopg", "httpx", "ag_ui", "starlette", "uvicorn",
        "opentelemetry",
        "anywidget", "marimo",
    }

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError("blocked optional dependency: " + name)
            return None

    sys.meta_path.insert(0, Refuse())
    import intermission
    import intermission.otel  # (imports OpenTelemetry only when switched on)
    from intermission import FlowEngine, GraphSpec, InMemoryAgentSession, END

    spec = GraphSpec("g")
    spec.add_start().link_add("gate")
    def gate(ctx, node):
        if not ctx.get("ok"):
            ctx.session.pending(True, "wait")
    spec.add_activity("gate").task(gate).link_add(END)
    spec.add_end()
    s = InMemoryAgentSession.of("s")
    FlowEngine().eval(spec, s.context)
    assert s.is_pending
    s = InMemoryAgentSession.restore(s.to_json())
    s.context.put("ok", True)
    assert FlowEngine().eval(spec, s.context).is_done
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not leaked, leaked
    print("OK")
    """
)


def test_core_imports_no_optional_dependency() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK"


STATE_SCRIPT = textwrap.dedent(
    """
    import sys, json
    from intermission.core import InMemoryAgentSession
    snapshot = json.loads(sys.argv[1])
    s = InMemoryAgentSession.restore(snapshot)   # a session holding a ReAct agent's state
    assert isinstance(s.traces["ops"], dict) and s.traces["ops"]["kind"] == "react"
    assert s.to_json() == sys.argv[1] and json.loads(s.to_json()) == snapshot  # unchanged
    leaked = sorted(m for m in sys.modules if m in ("intermission.traces", "intermission.agents"))
    assert not leaked, leaked
    print("OK")
    """
)


def test_the_core_session_holds_agent_state_without_knowing_agents() -> None:
    from intermission import ReActTrace
    from intermission.testing.conformance import paused_ops

    text = paused_ops("opaque").to_json()
    out = subprocess.run([sys.executable, "-c", STATE_SCRIPT, text], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK"
    # an agent claims its state when it runs: validated then, and typed
    from intermission import InMemoryAgentSession

    s = InMemoryAgentSession.restore(text)
    assert isinstance(s.agent_state("ops", ReActTrace), ReActTrace)


OTEL_SCRIPT = textwrap.dedent(
    """
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ImportError("blocked optional dependency: " + name)
            return None

    sys.meta_path.insert(0, Refuse())
    import intermission.otel
    from intermission import MissingDependencyError
    from intermission.core import listeners
    from intermission.testing.conformance import paused_ops

    try:
        intermission.otel.instrument()
    except MissingDependencyError as exc:
        assert "pip install 'intermission[otel]'" in str(exc), str(exc)
    else:
        raise AssertionError("instrument() without OpenTelemetry must say what to install")
    assert not listeners.LISTENERS and not intermission.otel.is_instrumented()
    s = paused_ops("s")  # nothing changed: sessions pause and carry no tracing data
    assert s.meta == {} and '"meta"' not in s.to_json()
    print("OK")
    """
)


def test_tracing_without_its_extra_says_what_to_install_and_changes_nothing() -> None:
    out = subprocess.run([sys.executable, "-c", OTEL_SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK"


def test_the_audit_records_are_data_below_every_layer() -> None:
    """``intermission.audit`` (issue 39) imports nothing of the core, the agents, hitl, the
    stores or the surfaces, at import time or in any function: it is read by all of them."""
    import ast
    from pathlib import Path

    import intermission.audit as audit

    above = ("core", "agents", "hitl", "stores", "agui", "notebook", "notify", "otel", "cli")
    tree = ast.parse(Path(audit.__file__).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.module else [a.name for a in node.names]
            found += [n for n in names if n.split(".")[0] in above]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[1:2] in [[x] for x in above]]
    assert found == [], found
    out = subprocess.run(
        [sys.executable, "-c", "import sys, intermission.audit; "
         "print(sorted(m for m in sys.modules if m.startswith('intermission.core')))"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
