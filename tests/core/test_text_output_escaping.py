"""R42: text from model output cannot spoof the CLI or break a diagram. Every printed field
of the CLI escapes control characters; mermaid text is parsed by the real mermaid parser
(npm's ``mermaid`` in ``jsdom``, run by Node) and DOT by Graphviz's ``dot``, for labels
holding every character their grammars reserve."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests._helpers import need

from intermission import END, FlowEngine, GraphSpec, InMemoryAgentSession
from intermission.cli import main
from intermission.core.ir import extract
from intermission.core.render_text import to_dot, to_mermaid
from intermission.stores import SQLiteStore

JS = Path(__file__).resolve().parents[1] / "js"
HOSTILE = [
    "50%\r%% done",
    "line one\nline two\r\nline three",
    'say "hi" and \'bye\'',
    "brackets [a] (b) {c} <d> |e|",
    "%% a comment? #35; #quot; & ; `code`",
    "<script>alert(1)</script>",
    "esc \x1b[2K and bell \x07 and nul \x00 and del \x7f",
    "right-to-left \u202egnp.exe and tab\t",
    "ünïcödé 日本語 ✓",
    "\\ back\\slash \\n not a newline",
]


def graph_with(label: str) -> tuple[GraphSpec, InMemoryAgentSession]:
    spec = GraphSpec("hostile", title=label)
    spec.add_start().link_add("gate", title=label)
    spec.add_activity("gate").title(label).task(
        lambda ctx, node: ctx.session.pending(True, label)  # type: ignore[union-attr]
    ).link_add(END, title=label)
    spec.add_end()
    s = InMemoryAgentSession.of("h")
    FlowEngine().eval(spec, s.context)
    return spec, s


def parse_mermaid(texts: list[str]) -> list[str | None]:
    node = shutil.which("node")
    need(node is not None, "Node.js (apt-get install nodejs)")
    need((JS / "node_modules" / "mermaid").exists(), "mermaid and jsdom (npm ci --prefix tests/js)")
    out = subprocess.run(
        [str(node), str(JS / "parse_mermaid.mjs")],
        input=json.dumps(texts), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    result: list[str | None] = json.loads(out.stdout)
    return result


def test_the_real_mermaid_parser_reads_every_label_and_the_raw_text_would_break_it() -> None:
    texts = [to_mermaid(extract(*graph_with(label))) for label in HOSTILE]
    assert parse_mermaid(texts) == [None] * len(texts)
    # the parser is real: the same labels written raw do break it
    raw = [f'flowchart LR\n  n0["{label}"]\n' for label in (HOSTILE[0], HOSTILE[2])]
    assert all(err is not None and "Parse error" in err for err in parse_mermaid(raw))


def test_dot_reads_every_label_and_shows_control_characters_as_escapes() -> None:
    dot = shutil.which("dot")
    need(dot is not None, "Graphviz's dot (apt-get install graphviz)")
    for label in HOSTILE:
        source = to_dot(extract(*graph_with(label)))
        assert "\x1b" not in source and "\r" not in source and "\x00" not in source
        done = subprocess.run([str(dot), "-Tsvg"], input=source, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0 and "<svg" in done.stdout, (label, done.stderr)
        assert "Warning" not in done.stderr and "Error" not in done.stderr, done.stderr


FORGED = "harmless\r\x1b[2K\u2026\nfake-9 ops 0 looks ok\u202e"


def test_the_cli_escapes_control_characters_in_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = str(tmp_path / "s.sqlite")
    store = SQLiteStore(store_path)
    _spec, s = graph_with(FORGED)
    s.context.put("approval.request", FORGED)
    s.context.put("change.result", FORGED)
    s.agent = FORGED
    s.once(FORGED, lambda: "done")
    store.save(s)
    store.close()
    assert main(["pending", "--store", store_path]) == 0
    assert main(["show", "h", "--store", store_path]) == 0
    assert main(["show", FORGED, "--store", store_path]) == 2  # the error line too
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    rows = captured.out.splitlines()
    assert not any(row.startswith("fake-9") for row in rows)  # no forged row
    assert "harmless\\r\\x1b[2K\u2026\\nfake-9 ops 0 looks ok\\u202e" in captured.out
    assert captured.out.count("harmless\\r") >= 5  # reason, agent, request, effect, result
