"""The memory web page: see what the agent remembers, search it, correct it, tidy it.

Two ways to open it:

- ``smriti ui`` (``smriti.webui.local``): a page on 127.0.0.1 for the user's own
  store, reached through the store's owner process like any other client; the first
  line it prints is the URL with a one-time token that opens a session.
- ``/ui`` on ``smriti serve --transport http`` with API keys or OAuth
  (``team_app``): each person signs in with their key and sees their own memory only.

Pages are rendered on the server (Jinja2, autoescaped, ``smriti.webui.render``); the
few kilobytes of script and style are files of this package (``smriti.webui.static``).
Every change is a typed request to the engine (``smriti.webui.actions``), checked for
its session's CSRF token and its Origin first (``smriti.webui.app``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from smriti.mcp_server.http import HttpPlan

#: Where the pages live.
UI_PATH = "/ui"


def under_ui(path: str) -> bool:
    """Whether a request path belongs to the page (``/ui`` and below)."""
    return path == UI_PATH or path.startswith(UI_PATH + "/")


def team_app(memories: Any, plan: HttpPlan, settings: Any, audit: Any = None) -> ASGIApp:
    """The page for a team server: sessions signed in with the MCP endpoint's own
    verifier, each user's memory from ``memories`` (``UserMemories``), each request
    in the server's ``audit`` log. The cookie is Secure unless the server is bound to
    loopback without an https public URL."""
    from smriti.mcp_server.http import is_loopback
    from smriti.webui.access import TeamAccess
    from smriti.webui.app import UI, build_app

    https = plan.resource_url.lower().startswith("https://")
    ui = UI(
        TeamAccess(memories, plan.verifier, audit),
        secure=https or not is_loopback(plan.host),
        max_chars=settings.max_content_chars,
        max_limit=settings.max_recall_limit,
    )
    return build_app(ui)


__all__ = ["UI_PATH", "team_app", "under_ui"]
