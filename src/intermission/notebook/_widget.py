"""What every notebook widget is: one ``anywidget.AnyWidget`` that draws its own page from
its traits with an ES module shipped in the package (``static/``: no CDN, no build step),
and whose buttons send messages handled here, in Python, by the same methods the code twins
call. So one widget works in JupyterLab, Notebook 7, JupyterLite and marimo
(``mo.ui.anywidget(widget)``); it is an ipywidgets ``DOMWidget`` all the same.

The messages: the page sends ``{"action": name, "seq": id, **fields}`` (the fields are what
the person typed: reviewer, comment, reason, edited arguments…); Python handles it and then
answers ``{"ack": id}``, so the page knows the kernel is alive and listening. The page also
writes ``seen`` once it drew a new ``revision``: marimo re-runs the cells that read a widget's
value only when the page writes to it, also when the change came from a background resume.
"""

from __future__ import annotations

import base64
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets as t

from ..errors import IntermissionError, UsageError
from ._html import CSS, esc

__all__ = ["View", "esm", "widget_ref"]

STATIC = pathlib.Path(__file__).resolve().parent / "static"


def esm(name: str) -> str:
    """The ES module of one widget: the shared toolkit, then the widget's own file."""
    shared = (STATIC / "_shared.js").read_text(encoding="utf-8")
    return shared + "\n" + (STATIC / f"{name}.js").read_text(encoding="utf-8")


def _css() -> str:
    inner = CSS.strip().removeprefix("<style>").removesuffix("</style>")
    return inner + "\n" + (STATIC / "widgets.css").read_text(encoding="utf-8")


def widget_ref() -> Any:
    """A trait holding another widget shown inside this one (an Inbox's opened session, a
    History's fork): the page draws it with anywidget's ``host.getWidget``."""
    return anywidget.WidgetTrait().tag(sync=True)


Handler = Callable[[dict[str, Any]], None]

NOT_LIVE = (
    "(an interactive widget: run this cell in JupyterLab, Notebook 7 or VS Code to use it; "
    "a stored copy or a page without a kernel shows only this line)"
)


def _esm_url_for_marimo(cls: type) -> str | None:
    """The module as a ``data:`` URL for a widget made in marimo outside a running cell
    (an Inbox opening a session, a History forking): marimo serves a widget's module as a
    file that belongs to the cell running at the time, and there is none then. None
    elsewhere (Jupyter loads the module's text; in a cell marimo makes the file)."""
    context = sys.modules.get("marimo._runtime.context")
    if context is None:
        return None
    try:
        running = context.get_context()
    except Exception:  # not inside a marimo kernel
        return None
    if getattr(running, "cell_id", None) is not None:
        return None
    source = str(getattr(cls, "_esm", ""))
    return "data:text/javascript;base64," + base64.b64encode(source.encode()).decode()


class View(anywidget.AnyWidget):
    """The base of every widget: the message protocol, a status line and a hint, and the
    revision the page echoes for marimo."""

    _css = _css()

    status = t.Unicode("").tag(sync=True)
    """The status line (HTML; everything in it is escaped where it is made)."""
    hint = t.Unicode("").tag(sync=True)
    """Where to click, when a code twin left the decision to a person (HTML)."""
    busy = t.Bool(False).tag(sync=True)
    """True while an action runs (the page greys its buttons)."""
    revision = t.Int(0).tag(sync=True)
    """Bumped whenever what the widget shows settled on something new (a decision landed)."""
    seen = t.Int(0).tag(sync=True)
    """The revision the page drew last: written by the page, never by Python."""
    outcome = t.Dict().tag(sync=True)
    """What the widget's session came to, as plain data (marimo cells read it)."""
    _mid = t.Unicode("").tag(sync=True)
    """The widget's own model id: the page asks the widget manager whether its kernel still
    listens (Jupyter marks the models of a restarted kernel dead)."""

    def __init__(self, **kwargs: Any) -> None:
        url = _esm_url_for_marimo(type(self))
        if url is not None:
            kwargs["_esm"] = url
        super().__init__(**kwargs)
        self._mid = self.model_id
        self.on_msg(self._received)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        shown = super()._repr_mimebundle_(**kwargs)
        data = shown[0] if isinstance(shown, tuple) else shown
        if isinstance(data, dict) and isinstance(data.get("text/plain"), str):
            # what a page that cannot draw the widget shows instead: a stored notebook opened
            # untrusted (a fresh clone, GitHub, nbviewer) or with no kernel behind it
            data["text/plain"] += f"\n{NOT_LIVE}"
        return shown

    def _actions(self) -> dict[str, Handler]:
        """The actions this widget's page may send, by name."""
        return {}

    def click(self, action: str, **fields: Any) -> None:
        """What a button of the page does, from code: handle the message it sends (say
        ``panel.click("decide", call_uuid=uuid, verdict="reject", reason="no")``). As on
        the page, a refusal is shown in the widget, not raised; a resume it starts runs
        beside the caller (``wait()`` waits for it)."""
        if action not in self._actions():
            raise UsageError(
                f"{type(self).__name__} has no action {action!r} "
                f"(it has: {', '.join(sorted(self._actions()))})"
            )
        self._handle(action, fields)

    def _handle(self, action: str, fields: dict[str, Any]) -> None:
        handler = self._actions().get(action)
        try:
            if handler is not None:
                handler(fields)
        except Exception as exc:  # shown in the widget, never a traceback in the kernel's log
            self._show_error(exc)

    def _received(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        fields = {k: v for k, v in content.items() if k not in ("action", "seq")}
        try:
            self._handle(str(content.get("action")), fields)
        finally:  # handled (or refused, which the widget shows): the page may go on
            if "seq" in content:
                self.send({"ack": content["seq"]})

    def _show_error(self, error: BaseException) -> None:
        """Show what went wrong with an action (nothing changed)."""
        if isinstance(error, IntermissionError):  # a sentence, never a class name
            said = str(error)
        else:  # an unexpected error (a bug): its kind helps whoever reports it
            said = f"Something went wrong ({type(error).__name__}: {error})"
        self.status = f"<span class='im-error'>{esc(said)}</span>"

    def _bump(self) -> None:
        """Say that what the widget shows settled on something new."""
        self.revision += 1

    @staticmethod
    def _text(fields: dict[str, Any], name: str) -> str | None:
        """A text field of a message (None when absent or not text)."""
        value = fields.get(name)
        return value if isinstance(value, str) else None
