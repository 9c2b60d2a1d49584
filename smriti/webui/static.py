"""The page's script and style: a few files shipped in the package, served from here
(nothing is fetched from the internet, there is no build step). ``graph.js`` is the
drawing script of ``smriti graph`` itself, so the live graph is the same drawing."""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from smriti.webui.render import SECURITY_HEADERS

#: name -> (package, file, media type)
FILES = {
    "ui.css": ("smriti.webui", "static/ui.css", "text/css"),
    "ui.js": ("smriti.webui", "static/ui.js", "text/javascript"),
    "graph.js": ("smriti.graphview", "page.js", "text/javascript"),
}


@cache
def _read(name: str) -> bytes:
    package, path, _ = FILES[name]
    return resources.files(package).joinpath(path).read_bytes()


async def serve(request: Request) -> Response:
    """One of ``FILES`` (no session needed: they hold no memory); 404 for any other."""
    name = request.path_params["name"]
    if name not in FILES:
        return Response("not found", status_code=404, media_type="text/plain")
    headers = {**SECURITY_HEADERS, "cache-control": "private, max-age=300"}
    return Response(_read(name), media_type=FILES[name][2], headers=headers)
