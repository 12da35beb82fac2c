"""The explorer's HTTP server: uvicorn on a background thread.

The socket is bound and listening before the thread starts, so a taken port
or a refused address is an error from :meth:`UIServer.start` itself, and a
browser that connects at once is queued rather than refused.  Inside an agent
the server's thread only reads: the live feed is an ordinary event-bus
subscriber, and the store serves each reader thread its own cursor.  Each
request must arrive whole within ``UIConfig.read_timeout`` (see
:mod:`actormem.ui._deadline`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import TYPE_CHECKING

import structlog
import uvicorn

from actormem._settings import check_arg
from actormem.store import MemoryStore
from actormem.ui._app import AppState, build_app
from actormem.ui._config import UIConfig, UIError, is_loopback, resolve_token
from actormem.ui._data import Explorer
from actormem.ui._deadline import protocol_class
from actormem.ui._live import LiveFeed

if TYPE_CHECKING:
    from actormem.runtime import MemoryRuntime

__all__ = ["UIServer"]

log = structlog.get_logger(__name__)


class UIServer:
    """The memory explorer for one store and/or one running agent.

    Args:
        store: the long-term store to explore (``None`` inside an agent
            without one: live view only).
        runtime: the running agent, for the live view and the next context.
        config: host, port, token, edits (see :class:`UIConfig`).

    Raises:
        UIError: a non-loopback host without a token, or a bad token.
    """

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        runtime: MemoryRuntime | None = None,
        config: UIConfig | None = None,
    ) -> None:
        self.config = config or UIConfig()
        self.token = resolve_token(self.config.host, self.config.token)
        self.explorer = Explorer(store, runtime=runtime, memory_dir=self.config.root)
        self._runtime = runtime
        self._feed: LiveFeed | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._state: AppState | None = None
        self._port = 0

    @property
    def port(self) -> int:
        """The port it listens on (0 before :meth:`start`)."""
        return self._port

    @property
    def url(self) -> str:
        """The address to open (with ``?token=`` when a token is required)."""
        host = self.config.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        if shown == "::":
            shown = "::1"
        if ":" in shown:
            shown = f"[{shown}]"
        base = f"http://{shown}:{self._port}/"
        return f"{base}?token={self.token}" if self.token else base

    @property
    def feed(self) -> LiveFeed | None:
        """The live feed (inside an agent, once started)."""
        return self._feed

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _bind(self) -> socket.socket:
        host, port = self.config.host, self.config.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            try:
                sock.bind((host, port))
            except OSError as exc:
                if port and self.config.port_fallback:
                    log.info("ui.port_taken", port=port, error=str(exc))
                    sock.bind((host, 0))
                else:
                    raise UIError(
                        f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                        + (" (pick another with --port, or 0 for any free port)" if port else "")
                    ) from None
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        return sock

    def start(self) -> UIServer:
        """Bind and serve on a background thread; returns at once (the URL is ready).

        Raises:
            UIError: the address cannot be bound.
        """
        if self._thread is not None:
            raise UIError("the explorer is already running")
        sock = self._bind()
        self._port = int(sock.getsockname()[1])
        if self._runtime is not None:
            self._feed = LiveFeed(self._runtime, self.config.ring)
        self._state = AppState(
            explorer=self.explorer,
            feed=self._feed,
            token=self.token,
            allow_edits=self.config.allow_edits,
            port=self._port,
        )
        app = build_app(self._state)
        uv_config = uvicorn.Config(
            app,
            http=protocol_class(self.config.read_timeout),  # stalled requests are cut off
            log_config=None,  # leave the application's logging alone
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(uv_config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="actormem-ui", daemon=True
        )
        self._thread.start()
        self._sock = sock
        if not is_loopback(self.config.host):
            log.warning("ui.exposed", host=self.config.host, port=self._port)
        log.info("ui.serving", url=self.url, edits=self.config.allow_edits)
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (or ``timeout``); True when it stopped."""
        check_arg("UIServer.wait", "timeout", timeout)
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the live streams and stop serving (idempotent)."""
        check_arg("UIServer.stop", "timeout", timeout)
        if self._state is not None:
            self._state.stopping = True
        if self._feed is not None:
            self._feed.close()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("ui.stop_timeout", seconds=timeout)
        with contextlib.suppress(OSError, AttributeError):
            self._sock.close()

    def __enter__(self) -> UIServer:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        host = self.config.host
        return f"UIServer({host}:{self._port}, {state}, edits={self.config.allow_edits})"
