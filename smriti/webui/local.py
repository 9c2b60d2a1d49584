"""``smriti ui``: the page for the user's own store, on 127.0.0.1.

The store is reached through its owner process like any other client (or opened here
when it has none). The port is bound before anything is printed, so the URL on the
first line of stdout always works; its one-time token opens a session that lasts as
long as this process. Requests must name this server in their ``Host`` (a page on
another site cannot reach it through DNS rebinding).
"""

from __future__ import annotations

import math
import os
import signal
import socket
import sys
import webbrowser
from typing import TYPE_CHECKING

from smriti.errors import ConfigError
from smriti.logs import get_logger

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from smriti.config import Settings

log = get_logger(__name__)

HOST = "127.0.0.1"


def run_ui(settings: Settings, port: int = 0, browser: bool = True) -> int:
    """Serve the page until SIGINT/SIGTERM; ``port`` 0 takes a free one."""
    from smriti.owner.service import open_service

    sock = _bind(port)  # a busy port fails at once, before the store is opened
    try:
        service = open_service(settings, "web page", background=True)
        try:
            return _serve(settings, service, sock, browser)
        finally:
            service.close()
    finally:
        sock.close()


def _serve(settings: Settings, service: object, sock: socket.socket, browser: bool) -> int:
    import uvicorn

    from smriti.stdlib_logs import configure_stdlib_logging
    from smriti.webui.access import LocalAccess
    from smriti.webui.app import UI, build_app
    from smriti.webui.sessions import SessionStore

    port = sock.getsockname()[1]
    # the session lasts as long as this process: the token cannot be used again
    sessions = SessionStore(idle=math.inf, max_age=math.inf)
    access = LocalAccess(service)  # type: ignore[arg-type]
    ui = UI(access, sessions, False, settings.max_content_chars, settings.max_recall_limit)
    url = f"http://{HOST}:{port}/ui/?token={sessions.one_time_token(access.user)}"
    print(url, flush=True)
    log.info("web page ready", url=f"http://{HOST}:{port}/ui/", user=access.user)
    if browser and has_display():
        webbrowser.open(url)
    configure_stdlib_logging(settings.log_level)  # uvicorn's lines to stderr
    config = uvicorn.Config(
        LocalGate(build_app(ui), port), log_config=None, access_log=False, lifespan="off"
    )
    # uvicorn stops on SIGINT/SIGTERM and then raises the signal again for the handler
    # it found: make that one a no-op, so Ctrl-C ends with 0 and the store is closed
    # (a second signal must not cut that short either).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stopping)
    uvicorn.Server(config).run(sockets=[sock])
    log.info("web page stopped")
    return 0


def _stopping(signum: int, frame: object) -> None:
    """The process is stopping already (no logging here: see smriti.mcp_server.server)."""


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {HOST}:{port} ({exc.strerror}): choose another --port, or "
            "leave it out for a free one"
        ) from None
    sock.listen(64)
    return sock


def has_display() -> bool:
    """Whether a browser can be shown: always on macOS and Windows; elsewhere when an
    X11 or Wayland display is set."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class LocalGate:
    """Only requests addressed to this server (``Host``: 127.0.0.1 or localhost with
    its port) and, when they carry one, from its own ``Origin`` reach the page."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        from mcp.server.transport_security import (
            TransportSecurityMiddleware,
            TransportSecuritySettings,
        )

        names = [f"{HOST}:{port}", f"localhost:{port}"]
        self.app = app
        self.security = TransportSecurityMiddleware(
            TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=names,
                allowed_origins=[f"http://{n}" for n in names],
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one connection after the Host and Origin checks."""
        if scope["type"] == "http":
            from starlette.requests import Request

            refused = await self.security.validate_request(Request(scope, receive))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
