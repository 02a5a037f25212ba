"""The notebook layer (extra ``notebook``): graphs with live state, timelines, approval
widgets, an inbox, a stepper, history with forks, and comparisons. The widgets are
anywidgets: one code base for JupyterLab, Notebook 7, JupyterLite and marimo
(``mo.ui.anywidget(widget)``). The only part of intermission that imports IPython,
ipywidgets, anywidget or graphviz; ``%load_ext intermission.notebook`` makes core objects
display richly (R33–R38, R45, R59). Names load on first use, like ``intermission``'s."""

from __future__ import annotations

import importlib as _importlib
from importlib.util import find_spec as _find_spec
from typing import TYPE_CHECKING
from typing import Any as _Any

from ..errors import MissingDependencyError as _Missing


def _installed(module: str) -> bool:
    try:
        return _find_spec(module) is not None
    except ValueError:  # in sys.modules as None: blocked
        return False


for _module in ("ipywidgets", "anywidget", "IPython"):  # said now, not at first use
    if not _installed(_module):
        raise _Missing(_module, "notebook", "")

# at once: the submodule ``settings`` would otherwise shadow the object of that name
from .settings import Settings, default_reviewer, settings  # noqa: E402

if TYPE_CHECKING:
    from .approval import ApprovalWidget
    from .compare import Compare
    from .formatters import load_ipython_extension, unload_ipython_extension
    from .graph_view import GraphView, show_graph
    from .history import History
    from .hitl_panel import HITLPanel
    from .inbox import Inbox
    from .resume import ResumeWidget, decision_widget
    from .stepper import Stepper
    from .timeline import Timeline, render_timeline

_WHERE = {
    "ApprovalWidget": ".approval",
    "Compare": ".compare",
    "GraphView": ".graph_view",
    "HITLPanel": ".hitl_panel",
    "History": ".history",
    "Inbox": ".inbox",
    "ResumeWidget": ".resume",
    "Stepper": ".stepper",
    "Timeline": ".timeline",
    "decision_widget": ".resume",
    "load_ipython_extension": ".formatters",
    "render_timeline": ".timeline",
    "show_graph": ".graph_view",
    "unload_ipython_extension": ".formatters",
}


def __getattr__(name: str) -> _Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'intermission.notebook' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ApprovalWidget",
    "Compare",
    "GraphView",
    "HITLPanel",
    "History",
    "Inbox",
    "ResumeWidget",
    "Settings",
    "Stepper",
    "Timeline",
    "decision_widget",
    "default_reviewer",
    "load_ipython_extension",
    "render_timeline",
    "settings",
    "show_graph",
    "unload_ipython_extension",
]
