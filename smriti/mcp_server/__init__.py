"""The MCP server: three tools and one prompt over stdio or streamable HTTP.

``build_server(memory)`` gives the server object (tests use it with the SDK's in-memory
client); ``run_server(settings)`` reaches the memory (the store's owner process, or an
engine opened here) and serves until stdin closes or a SIGTERM/SIGINT arrives, then
leaves it and returns 0.

Importing this package imports nothing heavy: the names below are loaded when first
used, so that ``smriti`` can answer ``initialize`` before the MCP SDK is imported
(``smriti.mcp_server.early``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smriti.mcp_server.server import Transport, run_server
    from smriti.mcp_server.tools import build_server, run_engine

_WHERE = {
    "Transport": "smriti.mcp_server.server",
    "run_server": "smriti.mcp_server.server",
    "build_server": "smriti.mcp_server.tools",
    "run_engine": "smriti.mcp_server.tools",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)


__all__ = ["Transport", "build_server", "run_engine", "run_server"]
