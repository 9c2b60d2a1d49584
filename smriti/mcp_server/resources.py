"""MCP resources: a memory as ``memory://{memory_id}``, and the caller's statistics and
clusters as ``memory://stats`` and ``memory://clusters``, for clients that browse
resources. The recall tool's results link to them: each item's ``uri``, and a
``resource_link`` content item per memory (``linked_result``).

Every resource is read like a tool call reads: the memory of the call's caller
(``Memories.use`` with the read scope, so a team server's user sees only their own
memories), through the store's owner process (a typed request of ``smriti.requests``).
An id of another user's memory is "not found", exactly as an unknown id is.

The contents are ``application/json``: lossless and structured for a client or an
agent to read, and memory text stays data. As Markdown, a hostile memory's text could
carry links or images that a client renders (and fetches); in JSON it is a string.

Errors are JSON-RPC errors a person can act on: ``-32002`` (the MCP specification's
"resource not found") for an unknown id, invalid-params for a malformed one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import pydantic_core
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import Resource
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    ResourceLink,
    TextContent,
)
from pydantic import Field

from smriti.errors import InvalidInput, NotFound, SmritiError
from smriti.logs import get_logger
from smriti.requests import ClustersRequest, DetailsRequest, Request, StatsRequest

if TYPE_CHECKING:
    from mcp.server import MCPServer

log = get_logger(__name__)

#: The URI scheme of Smriti's resources.
SCHEME = "memory"
#: One memory, in full (``smriti.engine.details.memory_details``).
MEMORY_TEMPLATE = f"{SCHEME}://{{memory_id}}"
#: The caller's statistics (what ``smriti_manage`` action=stats answers).
STATS_URI = f"{SCHEME}://stats"
#: The caller's clusters, largest first (what ``smriti clusters`` lists).
CLUSTERS_URI = f"{SCHEME}://clusters"
JSON = "application/json"
#: The MCP specification's error code for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002
#: The parts of a memory's details that list other memories, each given its ``uri``.
LINKED_PARTS = ("associations", "versions", "merged")


def memory_uri(memory_id: str) -> str:
    """The resource URI of memory ``memory_id``."""
    return f"{SCHEME}://{memory_id}"


def audited(uri: object) -> tuple[str, list[str]]:
    """What the audit log says of a read of ``uri``: ``stats``, ``clusters`` or
    ``memory`` with the memory's id (at most 64 characters); ``unknown`` for any other
    URI, which is never written out (a client could put anything in it)."""
    text = uri if isinstance(uri, str) else ""
    if text in (STATS_URI, CLUSTERS_URI):
        return text.removeprefix(f"{SCHEME}://"), []
    key = text.removeprefix(f"{SCHEME}://")
    if key != text and key and "/" not in key:
        return "memory", [key[:64]]
    return "unknown", []


def linked_result(out: Mapping[str, Any]) -> CallToolResult:
    """A tool result of ``out`` (its structured content, and as JSON text, as the SDK
    would make them) followed by a ``resource_link`` to each memory in its
    ``results``, so that a client that browses resources can open them."""
    text = pydantic_core.to_json(out, fallback=str, indent=2).decode()
    links = [
        ResourceLink(
            name=str(item["id"]),
            title=str(item.get("summary") or item["id"]),
            uri=memory_uri(str(item["id"])),
            mime_type=JSON,
        )
        for item in out.get("results", [])
    ]
    return CallToolResult(
        content=[TextContent(type="text", text=text), *links], structured_content=dict(out)
    )


class CallerResource(Resource):
    """A fixed resource whose content depends on who reads it (the caller's own
    statistics or clusters). The SDK gives a request's context only to templates, so
    ``SmritiServer.read_resource`` reads these with ``read_for``."""

    make: Callable[[], Request] = Field(exclude=True)
    shape: Callable[[dict[str, Any]], dict[str, Any]] = Field(exclude=True)

    async def read(self) -> str:
        """Refused: this resource needs its reader (``read_for``)."""
        raise ResourceError(f"{self.uri} is read for the caller of a request")

    async def read_for(self, ctx: Context | None) -> str:
        """The resource's content for the caller of ``ctx``."""
        return await read_json(ctx, self.make(), str(self.uri), self.shape)


def register(server: MCPServer) -> None:
    """Add the memory template and the statistics and clusters resources to ``server``
    (a server of ``smriti.mcp_server.tools.build_server``)."""
    server.add_resource(
        CallerResource(
            uri=STATS_URI,
            name="stats",
            title="Memory statistics",
            description="Counts of your memories, cues and associations, and the "
            "components in use (as smriti_manage action=stats).",
            mime_type=JSON,
            make=StatsRequest,
            shape=lambda data: data,
        )
    )
    server.add_resource(
        CallerResource(
            uri=CLUSTERS_URI,
            name="clusters",
            title="Memory clusters",
            description="Your memories' clusters, largest first: size, most specific "
            "cues and the strongest memory of each (with its memory:// uri).",
            mime_type=JSON,
            make=ClustersRequest,
            shape=_linked_clusters,
        )
    )
    server.resource(
        MEMORY_TEMPLATE,
        name="memory",
        title="A memory",
        description="One memory in full: content, tags, cues, associations both ways, "
        "versions, origin, cluster and dates. The ids (and uris) come from smriti_recall.",
        mime_type=JSON,
    )(read_memory)


async def read_resource(
    server: MCPServer,
    uri: object,
    context: Context | None,
    read: Callable[[Any, Any], Awaitable[Any]],
) -> Any:
    """``SmritiServer.read_resource``: a ``CallerResource`` with this request's context
    (the SDK gives it only to templates), any other through the SDK's ``read``; an
    unknown URI is "resource not found" naming the resources there are."""
    fixed = {r.uri: r for r in server._resource_manager.list_resources()}.get(str(uri))
    if isinstance(fixed, CallerResource):
        return [ReadResourceContents(await fixed.read_for(context), fixed.mime_type)]
    try:
        return await read(uri, context)
    except ResourceNotFoundError:
        raise MCPError(
            RESOURCE_NOT_FOUND,
            f"unknown resource {str(uri)[:200]!r}: Smriti's resources are {STATS_URI}, "
            f"{CLUSTERS_URI} and {MEMORY_TEMPLATE} (ids from smriti_recall)",
            {"uri": str(uri)},
        ) from None


async def read_memory(memory_id: str, ctx: Context) -> str:
    """The resource ``memory://{memory_id}``: the caller's memory in full."""
    uri = memory_uri(memory_id)
    try:
        request = DetailsRequest.parse(memory_id)
    except InvalidInput as exc:
        raise MCPError(INVALID_PARAMS, f"{uri}: {exc}", {"uri": uri}) from None
    return await read_json(ctx, request, uri, _linked_details)


async def read_json(
    ctx: Context | None,
    request: Request,
    uri: str,
    shape: Callable[[dict[str, Any]], dict[str, Any]],
) -> str:
    """Run ``request`` on the memory of ``ctx``'s caller (read scope) and return its
    answer, passed through ``shape``, as JSON text; errors as MCP errors."""
    memories = getattr(ctx.mcp_server, "memories", None) if ctx is not None else None
    if memories is None:
        raise MCPError(INTERNAL_ERROR, "Smriti's resources are read on a server of build_server")
    try:
        async with memories.use(ctx, "read") as memory:
            data = await _run(memory, request, uri)
    except ToolError as exc:  # no verified caller, or a token without the read scope
        raise MCPError(INVALID_REQUEST, str(exc), {"uri": uri}) from None
    return json.dumps(shape(data), ensure_ascii=False, indent=1)


async def _run(memory: Any, request: Request, uri: str) -> dict[str, Any]:
    try:
        return await anyio.to_thread.run_sync(memory.run, request)  # type: ignore[no-any-return]
    except NotFound as exc:
        raise MCPError(RESOURCE_NOT_FOUND, f"{uri}: {exc}", {"uri": uri}) from None
    except InvalidInput as exc:
        raise MCPError(INVALID_PARAMS, f"{uri}: {exc}", {"uri": uri}) from None
    except SmritiError as exc:
        raise MCPError(INTERNAL_ERROR, f"{uri}: {exc}", {"uri": uri}) from None
    except Exception:
        log.exception("resource read failed unexpectedly", uri=uri)
        raise MCPError(
            INTERNAL_ERROR,
            f"Smriti hit an internal error reading {uri}; the server log (stderr) has the details.",
            {"uri": uri},
        ) from None


def _with_uri(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "uri": memory_uri(str(item["id"]))}


def _linked_details(data: dict[str, Any]) -> dict[str, Any]:
    """A memory's details with a ``uri`` on it and on every memory they list."""
    out = {**data, "uri": memory_uri(str(data["memory"]["id"]))}
    for part in LINKED_PARTS:
        out[part] = [_with_uri(item) for item in data.get(part, [])]
    cluster = data.get("cluster")
    if cluster:
        out["cluster"] = {**cluster, "members": [_with_uri(m) for m in cluster["members"]]}
    return out


def _linked_clusters(data: dict[str, Any]) -> dict[str, Any]:
    """The cluster table with a ``uri`` on each cluster's sample memory."""
    rows = [{**row, "sample": _with_uri(row["sample"])} for row in data.get("clusters", [])]
    return {**data, "clusters": rows}
