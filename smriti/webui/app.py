"""The page's ASGI app: routes, sessions, and the checks every request passes.

Every page needs a session (``smriti.webui.sessions``); without one the local page asks
for the link ``smriti ui`` printed and a team server shows its sign-in form. Every
POST must come from this page: its ``Origin`` names this server's host (a browser
always sends it on a POST) and its form carries the session's CSRF token; otherwise it
is refused with 403 before anything runs. Errors become pages: an unknown id (or
another user's) 404, a bad value 400, a missing scope 403.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from smriti.errors import InvalidInput, NotFound, SmritiError
from smriti.logs import get_logger
from smriti.webui import actions, pages, static
from smriti.webui.access import Forbidden, SignedOut
from smriti.webui.render import SECURITY_HEADERS, page
from smriti.webui.sessions import COOKIE, Session, SessionStore

if TYPE_CHECKING:
    from starlette.requests import Request

    from smriti.webui.access import Access

log = get_logger(__name__)

#: The path the pages live under (on a team server beside ``/mcp``).
BASE = "/ui"
#: The largest form accepted (a corrected memory is the largest field).
MAX_FORM_BYTES = 1 << 20

Handler = Callable[["UI", "Request", Session], Awaitable[Response]]


@dataclass
class UI:
    """One page server: how it reaches memories, its sessions, its cookie's flags."""

    access: Access
    sessions: SessionStore = field(default_factory=SessionStore)
    #: Whether the cookie is sent over HTTPS only (every bind but loopback).
    secure: bool = False
    #: The longest memory text a correction may hold, the most results a page shows.
    max_chars: int = 100_000
    max_limit: int = 100
    base: str = BASE

    def session_of(self, request: Request) -> Session | None:
        """The request's live session, if its cookie names one."""
        return self.sessions.get(request.cookies.get(COOKIE))

    def signed_in(self, response: Response, session: Session) -> Response:
        """``response`` setting the session cookie."""
        response.set_cookie(
            COOKIE,
            session.id,
            path=self.base,
            httponly=True,
            samesite="strict",
            secure=self.secure,
        )
        return response

    def redirect(self, path: str, **query: str) -> Response:
        """A 303 to ``path`` under the base, with ``query``."""
        url = f"{self.base}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)

    def error(self, status: int, message: str, session: Session | None = None) -> Response:
        """An error page."""
        return page(
            "error.html",
            {"status": status, "message": message, "session": session, "team": self.access.team},
            status,
            self.base,
        )


def build_app(ui: UI) -> Starlette:
    """The Starlette app serving ``ui``'s pages under ``ui.base``."""
    b = ui.base
    read, write = _reading(ui), _writing(ui)
    routes = [
        Route(b, lambda r: ui.redirect("/"), methods=["GET"]),
        Route(f"{b}/", _home(ui), methods=["GET"]),
        Route(f"{b}/list", read(pages.listing), methods=["GET"]),
        Route(f"{b}/memory/{{memory_id}}", read(pages.memory), methods=["GET"]),
        Route(f"{b}/memory/{{memory_id}}/forget", read(pages.confirm_forget), methods=["GET"]),
        Route(f"{b}/memory/{{memory_id}}/forget", write(actions.forget), methods=["POST"]),
        Route(f"{b}/memory/{{memory_id}}/correct", write(actions.correct), methods=["POST"]),
        Route(f"{b}/memory/{{memory_id}}/update", write(actions.update), methods=["POST"]),
        Route(f"{b}/tidy", read(pages.tidy), methods=["GET"]),
        Route(f"{b}/merge", write(actions.merge), methods=["POST"]),
        Route(f"{b}/graph", read(pages.graph), methods=["GET"]),
        Route(f"{b}/clusters", read(pages.clusters), methods=["GET"]),
        Route(f"{b}/stats", read(pages.stats), methods=["GET"]),
        Route(f"{b}/signout", write(actions.sign_out), methods=["POST"]),
        Route(f"{b}/signin", _sign_in_form(ui), methods=["GET"]),
        Route(f"{b}/signin", _sign_in(ui), methods=["POST"]),
        Route(f"{b}/static/{{name}}", static.serve, methods=["GET"]),
    ]

    async def no_route(request: Request, exc: Exception) -> Response:
        """An unknown path or method: an error page with the same headers as any page."""
        status = int(getattr(exc, "status_code", 404))
        return ui.error(status, "there is no such page" if status == 404 else "not allowed here")

    return Starlette(routes=routes, exception_handlers={404: no_route, 405: no_route})


def _home(ui: UI) -> Callable[[Request], Awaitable[Response]]:
    """The search page; ``?token=`` (the link ``smriti ui`` printed) opens a session."""
    search = _reading(ui)(pages.search)

    async def home(request: Request) -> Response:
        token = request.query_params.get("token")
        if token is None:
            return await search(request)
        session = ui.sessions.redeem(token)
        if session is None:
            return ui.error(
                403, "this link was used already or is unknown: run `smriti ui` again for a new one"
            )
        log.info("web page session opened", user=session.user)
        return ui.signed_in(ui.redirect("/"), session)  # the token leaves the address bar

    return home


def _reading(ui: UI) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """GET pages: a session is needed; errors become pages."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = ui.session_of(request)
            if session is None:
                return _no_session(ui)
            return await _answer(ui, handler, request, session)

        return endpoint

    return wrap


def _writing(ui: UI) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """POST actions: a session, this page's Origin and the session's CSRF token."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not same_origin(request):
                return ui.error(403, "refused: this form was not sent by this page (Origin)")
            session = ui.session_of(request)
            if session is None:
                return _no_session(ui)
            form = await read_form(request)
            if form is None:
                return ui.error(413, "the form is too large", session)
            if not session.csrf_ok(form.get("csrf")):
                return ui.error(403, "refused: the form's CSRF token is missing or wrong", session)
            request.state.form = form
            return await _answer(ui, handler, request, session)

        return endpoint

    return wrap


async def _answer(ui: UI, handler: Handler, request: Request, session: Session) -> Response:
    try:
        return await handler(ui, request, session)
    except SignedOut:
        ui.sessions.close(session.id)
        return _no_session(ui)
    except Forbidden as exc:
        return ui.error(403, str(exc), session)
    except NotFound as exc:
        return ui.error(404, str(exc), session)
    except InvalidInput as exc:
        return ui.error(400, str(exc), session)
    except SmritiError as exc:
        log.error("web page request failed", path=request.url.path, error=str(exc))
        return ui.error(500, str(exc), session)


def _no_session(ui: UI) -> Response:
    if ui.access.team:
        return ui.redirect("/signin")
    return ui.error(
        401, "not signed in: open the link `smriti ui` printed (run it again for a new one)"
    )


def same_origin(request: Request) -> bool:
    """Whether a POST's ``Origin`` header names the host it was sent to (the
    ``Host`` was checked against the allowed names before the request got here)."""
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if not origin or not host or origin == "null":
        return False
    return urllib.parse.urlsplit(origin).netloc.lower() == host.lower()


async def read_form(request: Request, limit: int = MAX_FORM_BYTES) -> dict[str, Any] | None:
    """The urlencoded form of a POST (a field sent twice as a list); None when it is
    larger than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    pairs = urllib.parse.parse_qsl(b"".join(chunks).decode("utf-8", "replace"), True)
    form: dict[str, Any] = {}
    for key, value in pairs:
        if key in form:
            held = form[key]
            form[key] = [*held, value] if isinstance(held, list) else [held, value]
        else:
            form[key] = value
    return form


def _sign_in_form(ui: UI) -> Callable[[Request], Awaitable[Response]]:
    async def sign_in_form(request: Request) -> Response:
        if not ui.access.team:
            return ui.error(404, "this page opens with the link `smriti ui` printed")
        return page("signin.html", {"session": None, "team": True, "problem": ""}, base=ui.base)

    return sign_in_form


def _sign_in(ui: UI) -> Callable[[Request], Awaitable[Response]]:
    """Exchange an API key (or OAuth access token) for a session cookie."""

    async def sign_in(request: Request) -> Response:
        if not ui.access.team:
            return ui.error(404, "this page opens with the link `smriti ui` printed")
        if not same_origin(request):
            return ui.error(403, "refused: this form was not sent by this page (Origin)")
        form = await read_form(request, 64 * 1024)
        secret = form.get("key") if form else None
        if not isinstance(secret, str) or not secret.strip():
            return _sign_in_refused(ui, "give an API key (smriti keys create USER) or a token")
        client = request.client.host if request.client else ""
        token = await ui.access.sign_in(secret)  # type: ignore[attr-defined]
        if isinstance(token, str):
            log.info("web page sign-in refused", reason=token, client=client)
            ui.access.refused(client, token)  # type: ignore[attr-defined]
            return _sign_in_refused(ui, token)
        session = ui.sessions.open(token.subject, token, client)
        log.info("web page session opened", user=session.user, client=client)
        return ui.signed_in(ui.redirect("/"), session)

    return sign_in


def _sign_in_refused(ui: UI, problem: str) -> Response:
    context = {"session": None, "team": True, "problem": problem}
    return page("signin.html", context, 401, ui.base)
