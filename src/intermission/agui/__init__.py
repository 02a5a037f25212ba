"""AG-UI for intermission (extra ``agui``): an AG-UI 1.0 endpoint whose interrupts live in
the store, and a reviewer console (R52).

``agui_app(agents, store, token=None)`` is an ASGI app; ``python -m intermission serve``
runs it with uvicorn. The interrupt rules are enforced here, against the store, whatever
the client does (see :mod:`intermission.agui.interrupts`).
"""

from __future__ import annotations

from typing import Any

from ..errors import MissingDependencyError

try:
    import ag_ui.core  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError(exc.name or "ag-ui-protocol", "agui") from None

from .app import MAX_BODY, agui_app
from .interrupts import RESPONSE_SCHEMA

__all__ = ["MAX_BODY", "RESPONSE_SCHEMA", "agui_app", "serve"]


def serve(app: Any, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run an app with uvicorn until interrupted (127.0.0.1 unless told otherwise)."""
    try:
        import uvicorn
    except ImportError:
        raise MissingDependencyError("uvicorn", "agui") from None
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
