"""A stdio transport that SIGTERM can stop while the server waits for input."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server


class SmritiServer(MCPServer):
    """MCPServer whose stdio transport can be stopped by SIGTERM while waiting for input.

    The SDK reads stdin in a worker thread that a cancellation cannot interrupt, so a
    server idle on stdin would ignore SIGTERM until the next message. Here stdin is read
    only after the event loop reports it readable, so cancellation is immediate.
    """

    async def run_stdio_async(self) -> None:
        """Serve MCP over stdin/stdout until stdin closes or the task is cancelled."""
        async with stdio_server(stdin=_CancellableStdin()) as (read_stream, write_stream):  # type: ignore[arg-type]
            lowlevel = self._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _CancellableStdin:
    """Async iterator of UTF-8 lines from file descriptor 0 that cancellation can stop."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False
        self.pollable = sys.platform != "win32"

    def __aiter__(self) -> _CancellableStdin:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer and not self.eof:
            chunk = await self._read()
            self.eof = not chunk
            self.buffer += chunk
        if not self.buffer:
            raise StopAsyncIteration
        line, sep, self.buffer = self.buffer.partition(b"\n")
        return (line + sep).decode("utf-8", errors="replace")

    async def _read(self) -> bytes:
        if self.pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:  # regular files and /dev/null cannot be polled; reads never block
                self.pollable = False
        if self.pollable:
            return os.read(self.fd, 65536)
        return await anyio.to_thread.run_sync(os.read, self.fd, 65536)
