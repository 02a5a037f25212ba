"""The notebook layer (extra ``notebook``): graphs with live state, timelines, approval
widgets, an inbox, a stepper, history with forks, and comparisons. The widgets are
anywidgets: one code base for JupyterLab, Notebook 7, JupyterLite and marimo
(``mo.ui.anywidget(widget)``). The only part of intermission that imports IPython,
ipywidgets, anywidget or graphviz; ``%load_ext intermission.notebook`` makes core objects
display richly (R33–R38, R45, R59)."""

from .._compat import require

require("ipywidgets", "notebook")
require("anywidget", "notebook")
require("IPython", "notebook")

from .approval import ApprovalWidget  # noqa: E402
from .compare import Compare  # noqa: E402
from .formatters import load_ipython_extension, unload_ipython_extension  # noqa: E402
from .graph_view import GraphView, show_graph  # noqa: E402
from .history import History  # noqa: E402
from .hitl_panel import HITLPanel  # noqa: E402
from .inbox import Inbox  # noqa: E402
from .resume import ResumeWidget, decision_widget  # noqa: E402
from .settings import Settings, default_reviewer, settings  # noqa: E402
from .stepper import Stepper  # noqa: E402
from .timeline import Timeline, render_timeline  # noqa: E402

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
