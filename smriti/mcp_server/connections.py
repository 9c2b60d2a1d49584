"""Slow and surplus HTTP connections: uvicorn's HTTP/1.1 protocol with a header deadline
and a connection cap.

uvicorn times out only a keep-alive connection between requests, and even that timer
is reset by every byte: a client that connects and sends nothing, or trickles its
headers a byte at a time, is kept forever. ``guarded_protocol`` returns an h11
protocol class that also

- gives each request ``header_timeout`` seconds from its first byte (from the
  connection's start for the first request) to complete its headers, else answers
  ``408`` and closes the connection;
- answers ``503`` and closes a connection beyond ``max_connections`` at once, before
  reading anything from it.

The request body has its own deadline in the ASGI app (``smriti.mcp_server.http``),
and uvicorn's ``timeout_keep_alive`` closes idle kept-alive connections.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from smriti.logs import get_logger

log = get_logger(__name__)

_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
    b"retry-after: 5\r\ncontent-length: 34\r\nconnection: close\r\n\r\n"
    b"too many connections; retry later\n"
)


def guarded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """An ``H11Protocol`` class with these limits, for ``uvicorn.Config(http=...)``."""

    class GuardedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol with a header deadline and a connection cap."""

        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                log.warning(
                    "connection refused: too many open", limit=max_connections, client=_peer(self)
                )
                transport.write(_BUSY)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first byte of the next request on a kept-alive connection
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the headers are complete

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            log.info(
                "connection closed: no complete request headers in time",
                timeout=header_timeout,
                client=_peer(self),
            )
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(_TIMEOUT)
            self.transport.close()

    return GuardedH11Protocol


def _peer(protocol: H11Protocol) -> str:
    client = getattr(protocol, "client", None)
    return f"{client[0]}:{client[1]}" if client else ""
