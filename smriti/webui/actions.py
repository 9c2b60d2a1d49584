"""The changes a page makes (POST): correct, update, forget, merge, sign out.

Each one is the typed request a tool call sends (``smriti.requests``) and runs through
the engine the same way, so the version chain, the backup and the owner's log follow.
The app has checked the Origin and the CSRF token before any of these runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.responses import Response

from smriti.errors import InvalidInput
from smriti.model import ORIGIN_USER
from smriti.requests import CorrectRequest, ForgetRequest, MergeRequest, UpdateRequest
from smriti.webui.sessions import COOKIE

if TYPE_CHECKING:
    from starlette.requests import Request

    from smriti.webui.app import UI
    from smriti.webui.sessions import Session


def _form(request: Request) -> dict[str, Any]:
    form: dict[str, Any] = request.state.form
    return form


def _text(form: dict[str, Any], name: str) -> str:
    value = form.get(name, "")
    if isinstance(value, list):
        raise InvalidInput(f"{name} was sent twice; send it once")
    return str(value)


async def correct(ui: UI, request: Request, session: Session) -> Response:
    """Store the form's text as a new version of the memory; show the new version."""
    form = _form(request)
    content = _text(form, "content").replace("\r\n", "\n")
    if not content.strip():
        raise InvalidInput("the corrected text is empty; write what the memory should say")
    if len(content) > ui.max_chars:
        raise InvalidInput(f"the corrected text is longer than {ui.max_chars:,} characters")
    asked = CorrectRequest.parse(
        request.path_params["memory_id"],
        content,
        origin=ORIGIN_USER,  # a person typed it on the page
        principal=ui.access.principal(session) or None,
    )
    done = await ui.access.run(session, asked, "write")
    return ui.redirect(f"/memory/{quote(done['new_id'], safe='')}", done="corrected")


async def update(ui: UI, request: Request, session: Session) -> Response:
    """Set the memory's tags and importance in place."""
    form = _form(request)
    importance = _text(form, "importance").strip()
    asked = UpdateRequest.parse(
        request.path_params["memory_id"],
        importance=importance or None,
        tags=_text(form, "tags"),
    )
    await ui.access.run(session, asked, "write")
    return ui.redirect(f"/memory/{quote(asked.memory_id, safe='')}", done="updated")


async def forget(ui: UI, request: Request, session: Session) -> Response:
    """Forget the memory (the form of the confirmation page says ``confirm=yes``)."""
    if _text(_form(request), "confirm") != "yes":
        raise InvalidInput("forgetting needs the confirmation: use the Forget button's page")
    asked = ForgetRequest.parse(request.path_params["memory_id"])
    await ui.access.run(session, asked, "write")
    return ui.redirect("/list", done="forgotten")


async def merge(ui: UI, request: Request, session: Session) -> Response:
    """Fold the group's ticked memories into the one chosen to keep."""
    form = _form(request)
    keep = _text(form, "keep")
    ticked = form.get("merge", [])
    others = [i for i in (ticked if isinstance(ticked, list) else [ticked]) if i != keep]
    if not keep or not others:
        raise InvalidInput("choose the memory to keep and tick at least one other to merge")
    done = await ui.access.run(session, MergeRequest.parse(keep, others), "write")
    return ui.redirect(f"/memory/{quote(done['memory']['id'], safe='')}", done="merged")


async def sign_out(ui: UI, request: Request, session: Session) -> Response:
    """End the session and forget its cookie."""
    ui.sessions.close(session.id)
    response = ui.redirect("/signin" if ui.access.team else "/")
    response.delete_cookie(COOKIE, path=ui.base)
    return response
