"""A proxy in front of the test server that can cut the client side of its connections.

:meth:`CutProxy.cut` closes every connection open through the proxy on the
client's side only: the server's side stays open, so each backend runs on
(finishing, or waiting in, the statement it had), as after a network
partition.  The client sees the connection die mid-statement and cannot know
whether its statement committed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class CutProxy:
    """A Unix-socket proxy to the server of ``dsn``; :attr:`dsn` connects through it."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        host = str(params.get("host") or "localhost")
        port = str(params.get("port") or "5432")
        self._upstream: Any = (
            os.path.join(host, f".s.PGSQL.{port}") if host.startswith("/") else (host, int(port))
        )
        self._folder = tempfile.mkdtemp(prefix="pgpx", dir="/tmp")  # socket paths are short
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(os.path.join(self._folder, f".s.PGSQL.{port}"))
        self._listener.listen(16)
        self.dsn = make_conninfo(dsn, host=self._folder, port=port)
        self._lock = threading.Lock()
        self._open: list[tuple[socket.socket, socket.socket]] = []
        self._kept: list[socket.socket] = []  # server sides of cut connections
        self._cut: set[int] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _server(self) -> socket.socket:
        if isinstance(self._upstream, str):
            up = socket.socket(socket.AF_UNIX)
        else:
            up = socket.socket(socket.AF_INET)
        up.connect(self._upstream)
        return up

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = self._server()
            with self._lock:
                self._open.append((client, server))
            threading.Thread(target=self._pump, args=(client, server, client), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, client: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            if id(client) in self._cut:
                return  # the server side stays open
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Close the client side of every open connection; keep the server sides open."""
        with self._lock:
            pairs, self._open = self._open, []
            for client, server in pairs:
                self._cut.add(id(client))
                self._kept.append(server)
        for client, _ in pairs:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            socks = [s for pair in self._open for s in pair] + self._kept
            self._open, self._kept = [], []
        for s in socks:
            s.close()
        shutil.rmtree(self._folder, ignore_errors=True)
