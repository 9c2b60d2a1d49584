"""Running the server: stdio or streamable HTTP, clean shutdown on EOF and signals.

Nothing here writes to stdout: on the stdio transport stdout is the protocol wire. Logs
go to stderr through structlog (``smriti.logs``).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server import MCPServer

from smriti.logs import configure_logging, get_logger
from smriti.mcp_server.tools import build_server

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.owner.service import Service

log = get_logger(__name__)

Transport = Literal["stdio", "http"]
#: How long a server waits for the store's owner before it starts answering its
#: client anyway (tool calls then wait for the owner): MCP clients give up on a
#: server that does not answer ``initialize`` within seconds, and opening a large
#: store can take longer. An error within this time still stops the server.
ATTACH_WAIT_SECONDS = 1.0


class _Shutdown(BaseException):
    """SIGTERM/SIGINT arrived before the event loop was running."""


_stop_requested = threading.Event()


def _raise_shutdown(signum: int, frame: object) -> None:
    raise _Shutdown(signum)


def _note_signal(signum: int, frame: object) -> None:
    _stop_requested.set()
    log.info("signal received; shutting down", signal=signal.Signals(signum).name)


def _set_signal_handlers(handler: Any) -> dict[int, Any]:
    """Install ``handler`` for SIGTERM and SIGINT; returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}  # only the main thread may set handlers (e.g. run in a test thread)
    return {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}


def run_server(
    settings: Settings,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
) -> int:
    """Reach the memory, serve MCP until stdin EOF or SIGTERM/SIGINT, leave, return 0.

    The memory is the store's owner process when the store has one (``smriti.owner``),
    else an engine opened here, which is always closed (flush and final backup sync)
    before returning. Logging is configured to stderr first; stdout carries only
    protocol. Errors while opening (ConfigError, BackendError, ...) propagate after
    cleanup.
    """
    configure_logging(settings.log_level)
    from smriti.owner.service import open_service

    _stop_requested.clear()
    # Until the event loop runs, a signal interrupts whatever is happening (e.g. a slow
    # restore); afterwards the loop (stdio) or uvicorn (HTTP) handles it.
    previous = _set_signal_handlers(_raise_shutdown)
    memory: Service | None = None
    try:
        memory = open_service(
            settings, f"{transport} server", background=True, attach_wait=ATTACH_WAIT_SECONDS
        )
        server = build_server(memory)
        _set_signal_handlers(_note_signal)
        log.info("serving", transport=transport, user=memory.user, shared=memory.remote)
        if transport == "stdio" and sys.stdin.isatty():
            log.warning("waiting for an MCP client on stdin; see `smriti --help` for commands")
        anyio.run(_serve, server, transport, host, port)
    except _Shutdown:
        log.info("signal received before serving started")
    finally:
        _set_signal_handlers(_note_signal)  # a second signal must not cut the close short
        if memory is not None:
            log.info("shutting down")
            memory.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("stopped")
    return 0


async def _serve(server: MCPServer, transport: Transport, host: str, port: int) -> None:
    async with anyio.create_task_group() as tg:
        if transport == "stdio":
            # uvicorn handles signals itself for HTTP; stdio needs our own handler.
            await tg.start(_cancel_on_signal, tg.cancel_scope)
            if _stop_requested.is_set():
                tg.cancel_scope.cancel()
            await server.run_stdio_async()
            log.info("stdin closed")
        else:
            await _serve_http(server, host, port)
        tg.cancel_scope.cancel()


async def _cancel_on_signal(scope: anyio.CancelScope, *, task_status: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            log.info("signal received", signal=signal.Signals(signum).name)
            scope.cancel()
            return


async def _serve_http(server: MCPServer, host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(host=host)
    # log_config=None: uvicorn's loggers propagate to the root logger on stderr
    # (its default config would write access lines to stdout).
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)
    log.info("listening", url=f"http://{host}:{port}/mcp")
    await uvicorn.Server(config).serve()
