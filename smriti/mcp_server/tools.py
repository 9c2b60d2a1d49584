"""The three tools and the prompt, on one user's memory (a ``Service``) or on the memory
of each call's verified caller (``smriti.mcp_server.users``).

Tool names and parameters match the reference server (SPEC §4) because MCP clients
already call them. Each tool is a module-level function: it builds the typed request of
``smriti.requests`` from its arguments (the same checks as the CLI, so that the SDK's
coercion never decides what a bad value means; every failure is a tool error whose
text a person or agent can act on), and hands it to the memory of the call
(``Service.run``), which carries it to the engine. ``build_server`` registers them on a
server that knows the memory.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, WithJsonSchema

from smriti import validation
from smriti.config import Settings
from smriti.errors import SmritiError
from smriti.logs import get_logger
from smriti.mcp_server.manage import (
    ID_ACTIONS,
    MANAGE_ACTIONS,
    READ_ACTIONS,
    ManageArgs,
    answer,
    checked,
    manage_request,
)
from smriti.mcp_server.resources import linked_result, memory_uri
from smriti.mcp_server.resources import register as register_resources
from smriti.mcp_server.schemas import (
    ImportanceArg,
    LimitArg,
    ManageOut,
    OptionalImportanceArg,
    OptionalTagsArg,
    RecallOut,
    StoredMemoryOut,
    TagsArg,
)
from smriti.mcp_server.texts import (
    MANAGE_DESCRIPTION,
    RECALL_DESCRIPTION,
    SERVER_INSTRUCTIONS,
    STORE_DESCRIPTION,
    SYSTEM_PROMPT,
)
from smriti.mcp_server.transport import SmritiServer
from smriti.mcp_server.users import Memories, SingleMemory, caller_principal
from smriti.model import MEMORY_TYPES, ORIGIN_AGENT, ORIGIN_USER
from smriti.requests import (
    RELATED_LIMIT,
    TEXT_IMPORT_FORMATS,
    RecallRequest,
    Request,
    StoreRequest,
)

if TYPE_CHECKING:
    from smriti.engine import Engine
    from smriti.owner.service import Service

log = get_logger(__name__)

__all__ = [
    "ID_ACTIONS",
    "MANAGE_ACTIONS",
    "READ_ACTIONS",
    "build_server",
    "checked",
    "needed_scope",
    "run_engine",
    "run_request",
    "smriti_manage",
    "smriti_recall",
    "smriti_store",
]

RECALL_MODES = validation.RECALL_MODES
TAG_MATCHES = validation.TAG_MATCHES
#: The origins a client may give a stored memory (``tool`` and ``import:`` are Smriti's).
CLIENT_ORIGINS = (ORIGIN_AGENT, ORIGIN_USER)
#: The scope each tool needs (``smriti_manage``: see ``needed_scope``).
TOOL_SCOPES = {"smriti_store": "write", "smriti_recall": "read"}


def needed_scope(tool: str, arguments: Mapping[str, Any] | None) -> str:
    """``read`` or ``write``: what a call of ``tool`` with ``arguments`` needs.

    Writing tools (store; manage correct, update, forget, consolidate and sync) need
    write, reading ones (recall; manage get, history, related and stats) read. An
    unknown tool needs read: its call fails anyway, with the SDK's error naming the
    tool. The HTTP layer asks this before a call is run (to answer 403), and the tool
    again when it runs.
    """
    if tool == "smriti_manage":
        action = arguments.get("action") if isinstance(arguments, Mapping) else None
        chosen = action.strip().lower() if isinstance(action, str) else ""
        return "read" if chosen in READ_ACTIONS else "write"
    return TOOL_SCOPES.get(tool, "read")


def client_origin(value: object) -> str:
    """smriti_store's ``origin``: agent (also for empty) or user; a tool error otherwise."""
    text = value.strip().lower() if isinstance(value, str) else value
    if text in ("", None):
        return ORIGIN_AGENT
    if text not in CLIENT_ORIGINS:
        raise ToolError(
            f"origin must be agent (what you concluded or wrote down) or user (the user's "
            f"own words), got {str(value)[:40]!r}"
        )
    return str(text)


async def run_engine[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a synchronous engine call in a worker thread, mapping errors to tool errors.

    SmritiError (invalid input, unknown id, backend failure...) becomes a tool error with
    its own message. Anything else is a bug: its traceback goes to the log (stderr) and
    the agent gets a generic message.
    """
    return await _in_thread(functools.partial(fn, *args, **kwargs), fn.__name__)


async def run_request(memory: Service, request: Request, progress: Any = None) -> Any:
    """Run ``request`` on ``memory`` in a worker thread, errors as ``run_engine`` maps
    them (an unexpected one names the operation)."""
    return await _in_thread(functools.partial(memory.run, request, progress), request.op)


async def _in_thread[T](call: Callable[[], T], name: str) -> T:
    try:
        return await anyio.to_thread.run_sync(call)
    except SmritiError as exc:
        log.debug("tool call rejected", call=name, error=str(exc))
        raise ToolError(str(exc)) from None
    except Exception:
        log.exception("tool call failed unexpectedly", call=name)
        raise ToolError(
            f"Smriti hit an internal error during {name}; nothing was reported to "
            "you beyond this. The server log (stderr) has the details."
        ) from None


def recall_out(request: RecallRequest, query: str, found: dict[str, Any]) -> RecallOut:
    """The structured recall result from what the recall operation returned."""
    items: list[Any] = [{**item, "uri": memory_uri(item["id"])} for item in found["results"]]
    out: RecallOut = {
        "query": query,
        "mode": request.shown_mode,
        "count": len(items),
        "results": items,
        "degraded": bool(found.get("degraded")),
        "next_cursor": found.get("next_cursor") or None,
    }
    if out["degraded"]:
        out["warning"] = str(found.get("warning", ""))
    return out


def _memories(ctx: Context | None) -> Memories:
    """The memories the server of this call serves (``build_server``)."""
    memories = getattr(ctx.mcp_server, "memories", None) if ctx is not None else None
    if memories is None:
        raise ToolError("Smriti's tools run on a server made by build_server")
    return memories  # type: ignore[no-any-return]


def _setting(memories: Memories, name: str) -> int:
    """A limit from the served memory's settings (the default when it has none)."""
    if memories.settings is not None:
        return int(getattr(memories.settings, name))
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    return int(defaults[name])  # type: ignore[call-overload]


def build_server(memory: Service | Engine | Memories) -> MCPServer:
    """An MCP server exposing ``memory`` as the smriti_store/recall/manage tools.

    ``memory`` is a Service (in this process or the store's owner), an open Engine,
    which is served in this process, or the memories of each call's caller
    (``UserMemories``). The tools find it on the server (``SmritiServer.memories``).
    """
    from smriti.engine import Engine
    from smriti.owner.service import LocalService

    if isinstance(memory, Engine):
        memories: Memories = SingleMemory(LocalService(memory))
    elif hasattr(memory, "use"):
        memories = memory  # type: ignore[assignment]
    else:
        memories = SingleMemory(memory)  # type: ignore[arg-type]
    settings = getattr(memories, "settings", None)
    level = (getattr(settings, "log_level", "info") or "info").upper()
    from smriti import __version__

    server = SmritiServer(
        "smriti",
        title="Smriti memory",
        version=__version__,
        instructions=SERVER_INSTRUCTIONS,
        log_level=level if level in {"DEBUG", "INFO", "WARNING", "ERROR"} else "INFO",
    )
    server.memories = memories
    for tool, hints in TOOLS:
        server.add_tool(
            tool,
            name=tool.__name__,
            title=hints.title,
            description=DESCRIPTIONS[tool.__name__],
            annotations=hints,
        )
    server.prompt(
        name="smriti_system_prompt",
        title="How to use Smriti memory",
        description="System-prompt text telling an agent when and how to store, recall, "
        "correct and forget with Smriti.",
    )(smriti_system_prompt)
    register_resources(server)
    return server


async def smriti_store(
    content: Annotated[str, Field(description="The text to remember, self-contained.")],
    importance: ImportanceArg = 0.5,
    tags: TagsArg = "",
    source: Annotated[
        str, Field(description="Where this came from, e.g. 'chat', a URL or file.")
    ] = "",
    occurred_at: Annotated[
        str,
        Field(
            description="When it happened (ISO 8601, e.g. 2023-05-08 or "
            "2023-05-08T13:56:00Z), for events stored after the fact such as an "
            "imported chat history; empty means now."
        ),
    ] = "",
    origin: Annotated[
        str,
        Field(
            description="Who said it: agent (default: what you concluded, inferred or "
            "wrote down) or user (the user's own words, as they said them).",
            json_schema_extra={"enum": list(CLIENT_ORIGINS)},
        ),
    ] = ORIGIN_AGENT,
    ctx: Context | None = None,
) -> StoredMemoryOut:
    """Store one memory."""
    memories = _memories(ctx)
    request = checked(
        StoreRequest.parse, content, importance, tags, source or None, None, occurred_at,
        client_origin(origin), caller_principal(ctx),
        max_chars=_setting(memories, "max_content_chars"),
    )  # fmt: skip
    async with memories.use(ctx, "write") as memory:
        return await run_request(memory, request)  # type: ignore[no-any-return]


async def smriti_recall(
    query: Annotated[
        str, Field(description="What to remember, a few key words. Empty lists recent.")
    ] = "",
    limit: LimitArg = 5,
    mode: Annotated[
        str,
        Field(
            description="recall (associative, default), search (semantic only) or "
            "list (most recently used).",
            json_schema_extra={"enum": list(RECALL_MODES)},
        ),
    ] = "recall",
    memory_type: Annotated[
        str,
        Field(
            description="Only this type: episodic, semantic or procedural (empty: all).",
            json_schema_extra={"enum": ["", *MEMORY_TYPES]},
        ),
    ] = "",
    tags: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(
            description="Only memories with at least one of these comma-separated "
            "tags (set tag_match to 'all' for memories with every one)."
        ),
    ] = "",
    tag_match: Annotated[
        str,
        Field(
            description="any (default): at least one of tags; all: every one of them.",
            json_schema_extra={"enum": list(TAG_MATCHES)},
        ),
    ] = "any",
    since: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(
            description="Only memories created at or after this ISO 8601 date or time "
            "('2025-03-01', '2025-03-01T09:30:00Z'; no zone means UTC)."
        ),
    ] = "",
    until: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(description="Only memories created before this ISO 8601 date or time."),
    ] = "",
    include_superseded: Annotated[
        Any,
        WithJsonSchema({"type": "boolean"}),
        Field(description="Also return old versions that a correction replaced."),
    ] = False,
    cursor: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(
            description="list mode: the next_cursor of the previous page, to get the page after it."
        ),
    ] = "",
    origin: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(
            description="Only memories of this origin: user, agent, tool, an import "
            "such as import:smriti, or import: for every import (empty: all)."
        ),
    ] = "",
    ctx: Context | None = None,
) -> Annotated[CallToolResult, RecallOut]:
    """Recall memories (the result links to each memory's resource, ``memory://<id>``)."""
    memories = _memories(ctx)
    request = checked(
        RecallRequest.parse, query or None, limit,
        mode.strip().lower() if isinstance(mode, str) else mode, memory_type, tags or None,
        tag_match, since, until, include_superseded, cursor, origin,
        max_limit=_setting(memories, "max_recall_limit"),
    )  # fmt: skip
    async with memories.use(ctx, "read") as memory:
        found = await run_request(memory, request)
    return linked_result(recall_out(request, query, found))


async def smriti_manage(
    action: Annotated[
        str,
        Field(
            description="get, correct, history, update, related, duplicates, merge, "
            "forget, purge, stats, "
            "consolidate, sync or import.",
            json_schema_extra={"enum": list(MANAGE_ACTIONS)},
        ),
    ],
    memory_id: Annotated[
        str,
        Field(
            description="The id of the memory (actions get, correct, history, update, "
            "related, forget, purge; merge: the survivor); ids come from smriti_recall."
        ),
    ] = "",
    content: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(
            description="correct: the corrected memory text, self-contained; import: "
            "the whole text of the file to import."
        ),
    ] = "",
    importance: OptionalImportanceArg = None,
    tags: OptionalTagsArg = None,
    limit: Annotated[
        Any,
        WithJsonSchema({"type": "integer", "minimum": 1}),
        Field(
            description=f"related: how many related memories; duplicates: how many "
            f"groups ({RELATED_LIMIT} for both)."
        ),
    ] = None,
    memory_ids: Annotated[
        Any,
        WithJsonSchema({"type": "string"}),
        Field(
            description="merge: the comma-separated ids of the memories to fold into "
            "memory_id (from action=duplicates)."
        ),
    ] = "",
    purge: Annotated[
        Any,
        WithJsonSchema({"type": "boolean"}),
        Field(
            description="correct: forget and erase the earlier versions instead of "
            "keeping them as history."
        ),
    ] = False,
    format: Annotated[
        str,
        Field(
            description=f"import: the format of content, one of {', '.join(TEXT_IMPORT_FORMATS)}.",
        ),
    ] = "",
    dry_run: Annotated[
        Any,
        WithJsonSchema({"type": "boolean"}),
        Field(description="import: preview the counts and a sample; store nothing."),
    ] = False,
    ctx: Context | None = None,
) -> ManageOut:
    """Manage memory."""
    memories = _memories(ctx)
    arguments = ManageArgs(
        action, memory_id, content, importance, tags, limit, memory_ids, purge, format, dry_run
    )
    max_limit = _setting(memories, "max_recall_limit")
    request = manage_request(arguments, caller_principal(ctx), max_limit)
    async with memories.use(ctx, needed_scope("smriti_manage", {"action": request.op})) as memory:
        return await answer(memory, request, ctx)


def smriti_system_prompt() -> str:
    """The system prompt telling an agent how to use Smriti."""
    return SYSTEM_PROMPT


#: Each tool and its MCP annotations (its title is the tool's title).
TOOLS: tuple[tuple[Callable[..., Any], ToolAnnotations], ...] = (
    (
        smriti_store,
        ToolAnnotations(
            title="Store a memory",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    ),
    (
        smriti_recall,
        ToolAnnotations(
            title="Recall memories",
            # Only access statistics change (SPEC §6.7); the memories themselves do not,
            # so clients may auto-approve it like a read.
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    ),
    (
        smriti_manage,
        ToolAnnotations(
            title="Manage memory",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=True,  # sync pushes to a remote backup
        ),
    ),
)
#: Each tool's description (``smriti.mcp_server.texts``).
DESCRIPTIONS = {
    "smriti_store": STORE_DESCRIPTION,
    "smriti_recall": RECALL_DESCRIPTION,
    "smriti_manage": MANAGE_DESCRIPTION,
}
