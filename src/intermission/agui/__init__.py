"""AG-UI for intermission (extra ``agui``): an AG-UI 1.0 endpoint whose interrupts live in
the store, and a reviewer console.

``agui_app(agents, store, token=None)`` is an ASGI app; ``python -m intermission serve``
runs it with uvicorn. The interrupt rules are enforced here, against the store, whatever
the client does (see :mod:`intermission.agui.interrupts`).
"""

from __future__ import annotations

import math
import signal
from types import FrameType
from typing import TYPE_CHECKING

from ..errors import MissingDependencyError

try:
    import ag_ui.core  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError(exc.name or "ag-ui-protocol", "agui") from None

from .app import DEFAULT_DRAIN_S, MAX_BODY, AGUIApp, agui_app
from .interrupts import RESPONSE_SCHEMA

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = ["DEFAULT_DRAIN_S", "MAX_BODY", "RESPONSE_SCHEMA", "AGUIApp", "agui_app", "serve"]


def serve(app: ASGIApp, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run an app with uvicorn until SIGTERM or SIGINT (127.0.0.1 unless told otherwise).

    The stop is graceful: the server stops accepting connections and an
    :class:`AGUIApp` refuses new runs at once; runs in flight, those whose client left
    included, get the app's ``drain_s`` to finish and save; the claims of any still going
    are then released (and logged), and the process exits. A second ^C exits at once."""
    try:
        import uvicorn
    except ImportError:
        raise MissingDependencyError("uvicorn", "agui") from None
    drain = app.drain_s if isinstance(app, AGUIApp) else DEFAULT_DRAIN_S

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if isinstance(app, AGUIApp) and sig in (signal.SIGTERM, signal.SIGINT):
                if self.should_exit and sig == signal.SIGINT:
                    # a second ^C: uvicorn skips its own waits, and the drain (which runs
                    # in the lifespan's shutdown, past those) ends now too
                    app._runs.hurry()
                app.stop()  # refuse new runs before anything else happens
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=math.ceil(drain))  # fmt: skip
    Server(config).run()
