"""Running the server: stdio or streamable HTTP, clean shutdown on EOF and signals.

Nothing here writes to stdout: on the stdio transport stdout is the protocol wire. Logs
go to stderr through structlog (``smriti.logs``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Literal

import anyio

from smriti.logs import configure_logging, get_logger
from smriti.stdlib_logs import configure_stdlib_logging

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from smriti.config import Settings
    from smriti.mcp_server.early import EarlyInitialize
    from smriti.mcp_server.http import HttpPlan
    from smriti.mcp_server.users import UserMemories
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
    # Only the first signal interrupts: a client stopping its server may send several
    # (the MCP SDK signals the whole process group), and a second one raised inside the
    # cleanup of the first would escape as a traceback.
    _set_signal_handlers(_note_signal)
    _stop_requested.set()
    raise _Shutdown(signum)


def _note_signal(signum: int, frame: object) -> None:
    # No logging here: the handler runs between two bytecodes of the main thread, which
    # may be inside a log call holding the writer's lock, and would wait for it forever.
    _stop_requested.set()


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
    early: EarlyInitialize | None = None,
    leave_signals: Any = None,
) -> int:
    """Reach the memory, serve MCP until stdin EOF or SIGTERM/SIGINT, leave, return 0.

    The memory is the store's owner process when the store has one (``smriti.owner``),
    else an engine opened here, which is always closed (flush and final backup sync)
    before returning. Over HTTP with authentication (``smriti.mcp_server.http``), each
    call uses its caller's memory, opened on demand (``UserMemories``). Logging is
    configured to stderr first; stdout carries only protocol. Errors while opening
    (ConfigError, BackendError, ...) propagate after cleanup; an unsafe HTTP setup (a
    non-loopback bind without authentication) is a ConfigError before anything opens.

    On stdio, ``early`` is the reader that may have answered ``initialize`` already
    (``smriti.mcp_server.early``). The MCP SDK is imported on a thread while the memory
    is reached: each takes a second or more, and a client is waiting. The store's owner
    process is started first, so that its start does not wait behind the import.

    When stdin closed (or opening failed), SIGTERM and SIGINT get back the handlers
    they had on entry, or ``leave_signals`` when given: the console script passes
    ``signal.SIG_IGN``, so that a client's repeated SIGTERM cannot turn its clean exit
    into "killed by SIGTERM". After a signal they keep a handler that only notes it.
    """
    configure_logging(settings.log_level)
    # before the SDK's MCPServer configures the root logger itself (without redaction)
    configure_stdlib_logging(settings.log_level)
    from smriti.owner.service import open_service

    sdk = threading.Thread(target=_import_tools, name="smriti-import-sdk", daemon=True)
    plan: HttpPlan | None = None
    if transport == "http":
        sdk.start()
        from smriti.mcp_server.http import plan_http

        plan = plan_http(settings, host, port)
    _stop_requested.clear()
    # Until the event loop runs, a signal interrupts whatever is happening (e.g. a slow
    # restore); afterwards the loop (stdio) or uvicorn (HTTP) handles it.
    previous = _set_signal_handlers(_raise_shutdown)
    memory: Service | UserMemories | None = None
    try:
        if plan is not None and plan.verifier is not None:
            memory = _user_memories(settings, plan)
        else:
            # The SDK is imported only once the owner is on its way: both compete for
            # this process's interpreter lock, and the owner's start is the longer path.
            memory = open_service(
                settings,
                f"{transport} server",
                background=True,
                attach_wait=ATTACH_WAIT_SECONDS,
                meanwhile=None if sdk.ident is not None else sdk.start,
            )
            log.info("serving", transport=transport, user=memory.user, shared=memory.remote)
        if sdk.ident is None:
            sdk.start()
        sdk.join()
        from smriti.mcp_server.tools import build_server

        server = build_server(memory)
        if early is not None:
            server.early = early  # type: ignore[attr-defined]
        _set_signal_handlers(_note_signal)
        if transport == "stdio" and sys.stdin.isatty():
            log.warning("waiting for an MCP client on stdin; see `smriti --help` for commands")
        anyio.run(_serve, server, transport, plan)
    except _Shutdown:
        log.info("signal received before serving started")
    finally:
        _set_signal_handlers(_note_signal)  # a second signal must not cut the close short
        if memory is not None:
            log.info("shutting down")
            memory.close()
        if not _stop_requested.is_set():
            # After a signal the process is on its way out: the default handler would
            # turn a repeat of that signal into exit code -15.
            for sig, handler in previous.items():
                signal.signal(sig, handler if leave_signals is None else leave_signals)
    log.info("stopped")
    return 0


def _import_tools() -> None:
    """Import the tools and with them the MCP SDK (errors are raised again when the
    main thread imports them)."""
    with contextlib.suppress(Exception):  # the main thread's import reports it
        import smriti.mcp_server.tools  # noqa: F401


def _user_memories(settings: Settings, plan: HttpPlan) -> UserMemories:
    from smriti.mcp_server.users import UserMemories

    assert plan.verifier is not None
    log.info(
        "serving",
        transport="http",
        users="each caller's own",
        auth="+".join(plan.verifier.modes),
        max_loaded_users=settings.max_loaded_users,
        resource=plan.resource_url,
    )
    return UserMemories(settings, plan.verifier.scopes)


async def _serve(server: MCPServer, transport: Transport, plan: HttpPlan | None) -> None:
    async with anyio.create_task_group() as tg:
        if transport == "stdio":
            # uvicorn handles signals itself for HTTP; stdio needs our own handler.
            await tg.start(_cancel_on_signal, tg.cancel_scope)
            if _stop_requested.is_set():
                tg.cancel_scope.cancel()
            await server.run_stdio_async()
            log.info("stdin closed")
        else:
            assert plan is not None
            await _serve_http(server, plan)
        tg.cancel_scope.cancel()


async def _cancel_on_signal(scope: anyio.CancelScope, *, task_status: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            log.info("signal received", signal=signal.Signals(signum).name)
            scope.cancel()
            return


def _web_page(server: MCPServer, plan: HttpPlan, audit: Any) -> Any:
    """The memory web page under ``/ui`` for the server's signed-in users."""
    from smriti.webui import team_app

    memories = getattr(server, "memories", None)
    return team_app(memories, plan, memories.base, audit)  # type: ignore[union-attr]


async def _serve_http(server: MCPServer, plan: HttpPlan) -> None:
    import uvicorn
    from starlette.types import ASGIApp

    from smriti.audit import AuditLog
    from smriti.mcp_server.connections import guarded_protocol
    from smriti.mcp_server.guard import AuditCalls
    from smriti.mcp_server.http import AuthGate, VersionGate

    limits = plan.limits
    inner = server.streamable_http_app(
        host=plan.host,
        transport_security=plan.security,
        session_idle_timeout=limits.session_idle,
    )
    audit = AuditLog(plan.audit_path) if plan.audit_path is not None else None
    if audit is not None:
        server.middleware.append(AuditCalls(audit))
    app: ASGIApp = (
        AuthGate(inner, plan, audit, ui=_web_page(server, plan, audit))
        if plan.verifier is not None
        else VersionGate(inner, limits.body_timeout)
    )
    # log_config=None: uvicorn's loggers propagate to the root logger on stderr
    # (its default config would write access lines to stdout).
    config = uvicorn.Config(
        app,
        host=plan.host,
        port=plan.port,
        log_config=None,
        access_log=False,
        http=guarded_protocol(limits.header_timeout, limits.max_connections),
        timeout_keep_alive=limits.keepalive,  # type: ignore[arg-type]  # a float works
    )
    shown = f"[{plan.host}]" if ":" in plan.host else plan.host
    log.info(
        "listening",
        url=f"http://{shown}:{plan.port}/mcp",
        public_url=plan.resource_url,
        audit_log=str(plan.audit_path) if audit is not None else "off",
        **dataclasses.asdict(limits),
    )
    try:
        await uvicorn.Server(config).serve()
    finally:
        if audit is not None:
            audit.close()
