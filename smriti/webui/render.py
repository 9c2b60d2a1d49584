"""The page templates (Jinja2, ``smriti/webui/templates``) and the headers every
answer carries.

Autoescape is on for every template, so memory text is always shown as text: a memory
holding ``<script>`` or ``<img onerror=...>`` is drawn as those characters. The
Content-Security-Policy allows scripts, styles and images from this server only and no
inline script, so even markup that slipped through could run nothing and load nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse

#: What the page may load: its own scripts, styles and images, nothing inline, no
#: frames, forms posting only back here.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    # the one-time token is in the first URL: never pass a URL of this page to
    # another site (not no-referrer: then a browser sends "Origin: null" with a form)
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}


@cache
def environment() -> Environment:
    """The template environment (autoescape on for every template)."""
    env = Environment(
        loader=PackageLoader("smriti.webui", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["snippet"] = snippet
    env.filters["number"] = lambda n: f"{int(n):,}"
    env.filters["segment"] = lambda text: quote(str(text), safe="")
    return env


def page(
    name: str, context: Mapping[str, Any], status: int = 200, base: str = "/ui"
) -> HTMLResponse:
    """The template ``name`` rendered with ``context``, with the security headers."""
    values = {"done": "", "session": None, "team": False, **context}
    html = environment().get_template(name).render(base=base, **values)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def when(value: object) -> str:
    """An ISO 8601 time as ``2026-01-31 14:05 UTC`` (anything else as it is)."""
    if not value:
        return "–"
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def snippet(text: object, length: int = 160) -> str:
    """``text`` on one line, cut to ``length`` characters."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= length else flat[: length - 1] + "…"
