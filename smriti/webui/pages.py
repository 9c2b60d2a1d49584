"""The pages that show memories (GET): search, list, a memory, tidy, graph, clusters,
counts. Each asks the session's memory one typed request (``smriti.requests``) and
renders a template; what a form sends is checked by the request's own ``parse``."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from markupsafe import Markup
from starlette.responses import Response

from smriti.errors import InvalidInput
from smriti.requests import (
    ClustersRequest,
    ConflictsRequest,
    DuplicatesRequest,
    GraphRequest,
    GrowthRequest,
    RecallRequest,
    StatsRequest,
)
from smriti.webui.render import page

if TYPE_CHECKING:
    from starlette.requests import Request

    from smriti.webui.app import UI
    from smriti.webui.sessions import Session

#: Results a search shows unless the form asks for another number.
SEARCH_LIMIT = 20
#: Memories on one page of the list.
LIST_PAGE = 50
#: Memories the graph draws unless asked (fewer than ``smriti graph``: it is drawn live).
GRAPH_LIMIT = 300
#: Months the growth chart shows (the latest).
CHART_MONTHS = 36
#: The messages a redirect after a change may show (by key: nothing from the URL is shown).
DONE = {
    "corrected": "Corrected: this is the new version; the old one is kept in its history.",
    "updated": "Updated.",
    "forgotten": "Forgotten.",
    "merged": "Merged: the other memories are kept as this one's history.",
}


def context(ui: UI, request: Request, session: Session, **values: Any) -> dict[str, Any]:
    """What every template gets: the session's user and CSRF token, the flash message."""
    done = DONE.get(request.query_params.get("done", ""), "")
    return {"session": session, "team": ui.access.team, "done": done, **values}


async def search(ui: UI, request: Request, session: Session) -> Response:
    """The search page: the same recall as the ``smriti_recall`` tool, with its filters;
    each result shows its score, match type and hop."""
    q = request.query_params
    form = _filter_values(q) | {"q": q.get("q", ""), "mode": q.get("mode", "recall")}
    form["limit"] = q.get("limit") or str(SEARCH_LIMIT)
    found: dict[str, Any] | None = None
    problem = ""
    if form["q"].strip():
        try:
            recall = RecallRequest.parse(
                form["q"], limit=_int(form["limit"], "limit"), mode=form["mode"],
                max_limit=ui.max_limit, **_filters(form),
            )  # fmt: skip
        except InvalidInput as exc:
            problem = str(exc)
        else:
            found = await ui.access.run(session, recall, "read")
    values = context(ui, request, session, form=form, found=found, problem=problem)
    return page("search.html", values, 400 if problem else 200, ui.base)


async def listing(ui: UI, request: Request, session: Session) -> Response:
    """Every memory, most recently used first, a page at a time, with tag, date and
    type filters."""
    q = request.query_params
    form = _filter_values(q)
    problem = ""
    found: dict[str, Any] | None = None
    try:
        recall = RecallRequest.parse(
            None, limit=LIST_PAGE, mode="list", cursor=q.get("cursor") or None,
            max_limit=max(ui.max_limit, LIST_PAGE), **_filters(form),
        )  # fmt: skip
    except InvalidInput as exc:
        problem = str(exc)
    else:
        found = await ui.access.run(session, recall, "read")
    following = ""
    if found and found.get("next_cursor"):
        kept = {k: v for k, v in form.items() if v}
        following = urllib.parse.urlencode({**kept, "cursor": found["next_cursor"]})
    values = context(
        ui, request, session, form=form, found=found, problem=problem, following=following,
        first=not q.get("cursor"),
    )  # fmt: skip
    return page("list.html", values, 400 if problem else 200, ui.base)


async def memory(ui: UI, request: Request, session: Session) -> Response:
    """One memory in full: content, cues, associations both ways, versions, origin,
    cluster, decay and access; with the forms that correct, update and forget it."""
    data = await _details(ui, session, request.path_params["memory_id"])
    return page("memory.html", context(ui, request, session, **data), base=ui.base)


async def confirm_forget(ui: UI, request: Request, session: Session) -> Response:
    """The question before a memory is forgotten."""
    data = await _details(ui, session, request.path_params["memory_id"])
    return page("forget.html", context(ui, request, session, **data), base=ui.base)


async def _details(ui: UI, session: Session, memory_id: str) -> dict[str, Any]:
    from smriti.requests import DetailsRequest

    return dict(await ui.access.run(session, DetailsRequest.parse(memory_id), "read"))


async def tidy(ui: UI, request: Request, session: Session) -> Response:
    """Groups of near-duplicate memories and of possible conflicts, each with a form
    that merges it, and the memories never recalled in a long time."""
    q = request.query_params
    threshold = q.get("threshold") or None
    report = await ui.access.run(
        session,
        DuplicatesRequest.parse(None if threshold is None else _float(threshold, "threshold")),
        "read",
    )
    conflicts = await ui.access.run(session, ConflictsRequest.parse(), "read")
    values = context(
        ui, request, session, report=report, conflicts=conflicts, threshold=threshold or ""
    )
    return page("tidy.html", values, base=ui.base)


async def graph(ui: UI, request: Request, session: Session) -> Response:
    """The memory graph, drawn live by ``smriti graph``'s own script: one cluster, a
    memory's neighbourhood, or the strongest memories."""
    from smriti.graphview.html import script_json
    from smriti.graphview.layout import layout
    from smriti.graphview.scene import SIZE_BY, build_scene

    q = request.query_params
    cluster = q.get("cluster") or None
    size_by = q.get("size_by") if q.get("size_by") in SIZE_BY else "importance"
    asked = GraphRequest.parse(
        None if cluster is None else _int(cluster, "cluster", low=-1),
        q.get("around") or None,
        _int(q.get("hops") or "2", "hops", low=0, high=5),
        _int(q.get("limit") or str(GRAPH_LIMIT), "limit", high=5000),
    )
    data = await ui.access.run(session, asked, "read")

    def draw() -> dict[str, Any]:  # igraph's layout: off the event loop
        return build_scene(data, layout(data), size_by)

    scene = await anyio.to_thread.run_sync(draw)
    # script_json writes <, > and & as \u escapes: no memory can end the data element
    values = context(
        ui, request, session, scene_json=Markup(script_json(scene)), scene=scene,
        asked=asked, size_by=size_by,
    )  # fmt: skip
    return page("graph.html", values, base=ui.base)


async def clusters(ui: UI, request: Request, session: Session) -> Response:
    """The Leiden clusters: size, most specific cues, strongest memory."""
    table = await ui.access.run(session, ClustersRequest.parse(), "read")
    return page("clusters.html", context(ui, request, session, table=table), base=ui.base)


async def stats(ui: UI, request: Request, session: Session) -> Response:
    """Counts, the components in use, and how the memory grew month by month."""
    counts = await ui.access.run(session, StatsRequest.parse(), "read")
    grew = await ui.access.run(session, GrowthRequest.parse(), "read")
    values = context(ui, request, session, counts=counts, months=grew["months"][-CHART_MONTHS:])
    return page("stats.html", values, base=ui.base)


# -- what the filter forms send -------------------------------------------------------------
FILTERS = ("memory_type", "tags", "tag_match", "since", "until", "origin")


def _filter_values(q: Mapping[str, str]) -> dict[str, str]:
    """The filter fields as the form sent them (for the form to show them again)."""
    values = {name: q.get(name, "").strip() for name in FILTERS}
    values["include_superseded"] = "1" if q.get("include_superseded") else ""
    return values


def _filters(form: Mapping[str, str]) -> dict[str, Any]:
    """The filter fields as ``RecallRequest.parse`` takes them (empty: no filter)."""
    return {
        "memory_type": form.get("memory_type") or None,
        "tags": form.get("tags") or None,
        "tag_match": form.get("tag_match") or "any",
        "since": form.get("since") or None,
        "until": form.get("until") or None,
        "origin": form.get("origin") or None,
        "include_superseded": bool(form.get("include_superseded")),
    }


def _int(text: str, name: str, low: int = 1, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, got {text[:40]!r}") from None
    if value < low or (high is not None and value > high):
        top = f" to {high}" if high is not None else " or more"
        raise InvalidInput(f"{name} must be {low}{top}, got {value}")
    return value


def _float(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a number, got {text[:40]!r}") from None
