"""The MCP server: three tools and one prompt over stdio or streamable HTTP.

``build_server(memory)`` gives the server object (tests use it with the SDK's in-memory
client); ``run_server(settings)`` reaches the memory (the store's owner process, or an
engine opened here) and serves until stdin closes or a SIGTERM/SIGINT arrives, then
leaves it and returns 0.
"""

from smriti.mcp_server.server import Transport, run_server
from smriti.mcp_server.tools import build_server, run_engine

__all__ = ["Transport", "build_server", "run_engine", "run_server"]
