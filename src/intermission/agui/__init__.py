"""AG-UI for intermission (extra ``agui``): an AG-UI 1.0 endpoint whose interrupts live in
the store, and a reviewer console.

``agui_app(agents, store, token=None)`` is an ASGI app; ``python -m intermission serve``
runs it with uvicorn. The interrupt rules are enforced here, against the store, whatever
the client does (see :mod:`intermission.agui.interrupts`).
"""

from __future__ import annotations

import math
import signal
import socket
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from ..errors import MissingDependencyError, ServeError

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


def serve(
    app: ASGIApp,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    on_ready: Callable[[str], object] | None = None,
) -> None:
    """Run an app with uvicorn until SIGTERM or SIGINT (127.0.0.1 unless told otherwise).

    The address is taken first: one that cannot be listened on (a port in use) raises
    :class:`~intermission.ServeError` and nothing starts. ``on_ready(url)`` is called once
    the server listens and the app has started (``port=0`` picks a free port; the URL
    names it).

    The stop is graceful: the server stops accepting connections and an
    :class:`AGUIApp` refuses new runs at once; runs in flight, those whose client left
    included, get the app's ``drain_s`` to finish and save; the claims of any still going
    are then released (and logged), and the process exits. A second ^C exits at once."""
    try:
        import uvicorn
    except ImportError:
        raise MissingDependencyError("uvicorn", "agui") from None
    drain = app.drain_s if isinstance(app, AGUIApp) else DEFAULT_DRAIN_S
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    url = f"http://[{host}]:{bound}/" if ":" in host else f"http://{host}:{bound}/"

    class Server(uvicorn.Server):
        interrupted = False

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            self.interrupted = self.interrupted or sig == signal.SIGINT
            if isinstance(app, AGUIApp) and sig in (signal.SIGTERM, signal.SIGINT):
                if self.should_exit and sig == signal.SIGINT:
                    # a second ^C: uvicorn skips its own waits, and the drain (which runs
                    # in the lifespan's shutdown, past those) ends now too
                    app._runs.hurry()
                app.stop()  # refuse new runs before anything else happens
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and isinstance(captured, list) and sig in captured:
                # uvicorn would raise SIGTERM again once stopped, and its default action
                # kills the process before any exit handler runs (the traces' last flush
                # among them): a graceful stop ends the process normally instead (exit 0)
                captured.remove(sig)

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if on_ready is not None and not self.should_exit:
                on_ready(url)

    config = uvicorn.Config(app, host=host, port=bound, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=math.ceil(drain))  # fmt: skip
    server = Server(config)
    with sock:
        server.run(sockets=[sock])
    if server.interrupted:
        # ^C ends in KeyboardInterrupt (exit 130) even where SIGINT was ignored when the
        # process started (a background job): uvicorn re-raises the signal, which is then lost
        raise KeyboardInterrupt


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (as uvicorn binds it), or ServeError."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:  # (OverflowError: a port past 65535)
        sock.close()
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ServeError(host, port, why.lower() if why[:1].isupper() else why) from None
    return sock
