"""Core never imports the optional layers (STYLE §1)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys

    BLOCKED = {
        "IPython", "ipywidgets", "graphviz", "psycopg", "httpx", "ag_ui", "starlette", "uvicorn",
        "opentelemetry",
        "anywidget", "marimo", "temporalio",
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


# -- hitl/'s modules import one another one way ----------------------------------------
HITL_DIR = Path(__file__).resolve().parents[1] / "src" / "intermission" / "hitl"


def hitl_imports(directory: Path = HITL_DIR) -> dict[str, set[str]]:
    """Each module of ``intermission.hitl`` (by file stem) → the modules of the package it
    imports, at module level or inside a function (``from .api import x`` in a function
    body is an edge too: it only moves the circle to run time)."""
    names = {p.stem for p in directory.glob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in names}
    for path in directory.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level == 1:  # from .x import y / from . import x
                    targets = [base.split(".")[0]] if base else [a.name for a in node.names]
                elif node.level == 2 and base.startswith("hitl"):  # from ..hitl.x import y
                    rest = base.split(".")[1:]
                    targets = rest[:1] if rest else [a.name for a in node.names]
                elif node.level == 0 and base.startswith("intermission.hitl"):
                    rest = base.split(".")[2:]
                    targets = rest[:1] if rest else [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[2] for a in node.names
                           if a.name.startswith("intermission.hitl.")]  # fmt: skip
            edges[path.stem] |= {t for t in targets if t in names and t != path.stem}
    return edges


def a_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, a]``), or None when the imports form a DAG."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for nxt in sorted(edges[name]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[name] = 2
        return None

    for name in sorted(edges):
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def test_hitl_modules_import_one_another_one_way() -> None:
    """Before: graph imported timeouts, refusals, policy and api's default_principal inside
    functions, while timeouts imported graph and api imported graph through deadlines and
    interceptor — two circles (graph → timeouts → graph, graph → api → deadlines → graph).
    Shared pieces now live in leaves (approval_keys, deciding, refusals, policy)."""
    edges = hitl_imports()
    assert {"api", "graph", "timeouts", "policy", "interceptor"} <= set(edges)
    assert a_cycle(edges) is None, " → ".join(a_cycle(edges) or [])


def test_the_cycle_finder_finds_a_circle_through_a_function_local_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from .b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from .c import y\n")
    (tmp_path / "c.py").write_text("from ..hitl.a import z\n")
    (tmp_path / "d.py").write_text("import intermission.hitl.a\n")
    edges = hitl_imports(tmp_path)
    assert edges == {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert a_cycle(edges) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"b"}, "b": set()}) is None


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


EXTRAS_SCRIPT = textwrap.dedent(
    """
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "temporalio":
                raise ImportError("blocked: " + name)
            return None

    sys.meta_path.insert(0, Refuse())
    import intermission.agui, intermission.notebook, intermission.notify, intermission.otel
    import intermission.slack, intermission.stores, intermission.stores.postgres
    from intermission.cli import build_parser
    from intermission.stores import open_store
    build_parser().parse_args(["pending"])
    open_store("memory:").close()
    try:
        open_store("temporal://127.0.0.1:1/default")
    except ImportError as exc:  # (MissingDependencyError names the extra)
        assert "intermission[temporal]" in str(exc), exc
    else:
        raise AssertionError("a Temporal store opened without temporalio")
    leaked = sorted(m for m in sys.modules if m.startswith(("temporalio", "intermission.temporal")))
    assert not leaked, leaked
    print("OK")
    """
)


def test_the_other_extras_and_the_cli_never_import_temporal() -> None:
    """Only a temporal:// store (or the worker command) loads temporalio, and without it
    that store is a MissingDependencyError naming the extra."""
    out = subprocess.run([sys.executable, "-c", EXTRAS_SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK"
