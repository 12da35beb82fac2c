"""A read deadline per request for the explorer's HTTP server (stalled clients).

Why a module of its own: uvicorn's h11 protocol times out only an idle
keep-alive connection *between* requests.  A client that connects and sends
half of its headers (or announces a body and sends part of it) was kept for
as long as it liked -- a few such clients (slowloris) hold connections and
memory for good.  :func:`protocol_class` returns uvicorn's h11 protocol with
one timer per connection: armed when the connection is made and again when
each response ends, cancelled once the whole request (headers and body) has
arrived.  When it fires the connection is closed; a handler still waiting
for the body sees a disconnect.  Other connections are not affected.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["protocol_class"]

log = structlog.get_logger("actormem.ui._server")

#: The client's states while a request is still arriving.
_RECEIVING = (h11.IDLE, h11.SEND_BODY)


class _DeadlineH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request."""

    read_timeout: float = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state not in _RECEIVING:
            self._disarm()  # the whole request is in: the handler takes its time

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state in _RECEIVING:
            self._arm()  # the next request (or the rest of an unread body) has its deadline

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.read_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.info(
            "ui.request_read_timeout",
            client=f"{self.client[0]}:{self.client[1]}" if self.client else "?",
            seconds=self.read_timeout,
            state=str(self.conn.their_state),
        )
        self.transport.close()


def protocol_class(read_timeout: float) -> type[Any]:
    """uvicorn's h11 protocol that closes a connection whose request takes
    longer than ``read_timeout`` seconds to arrive."""
    return type("ReadDeadlineH11", (_DeadlineH11,), {"read_timeout": float(read_timeout)})
