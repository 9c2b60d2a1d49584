"""The three tools and the prompt, on one user's memory (a ``Service``) or on the memory
of each call's verified caller (``smriti.mcp_server.users``).

Tool names and parameters match the reference server (SPEC §4) because MCP clients
already call them. Arguments are validated here with ``smriti.validation`` (the same
rules as the engine and the CLI) so that the SDK's coercion never decides what a bad
value means; every failure is a tool error whose text a person or agent can act on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from smriti import validation
from smriti.errors import InvalidInput, SmritiError
from smriti.logs import get_logger
from smriti.mcp_server.schemas import (
    ForgottenOut,
    ImportanceArg,
    LimitArg,
    ManageOut,
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
from smriti.mcp_server.users import Memories, SingleMemory
from smriti.model import MEMORY_TYPES

if TYPE_CHECKING:
    from smriti.engine import Engine
    from smriti.owner.service import Service

log = get_logger(__name__)

RECALL_MODES = validation.RECALL_MODES
MANAGE_ACTIONS = ("forget", "sync", "consolidate", "stats")
#: Manage actions that only read; every other one needs the write scope.
READ_ACTIONS = ("stats",)
#: The scope each tool needs (``smriti_manage``: see ``needed_scope``).
TOOL_SCOPES = {"smriti_store": "write", "smriti_recall": "read"}


def needed_scope(tool: str, arguments: Mapping[str, Any] | None) -> str:
    """``read`` or ``write``: what a call of ``tool`` with ``arguments`` needs.

    Writing tools (store; manage forget, consolidate and sync) need write, reading ones
    (recall; manage stats) read. An unknown tool needs read: its call fails anyway, with
    the SDK's error naming the tool. The HTTP layer asks this before a call is run (to
    answer 403), and the tool again when it runs.
    """
    if tool == "smriti_manage":
        action = arguments.get("action") if isinstance(arguments, Mapping) else None
        chosen = action.strip().lower() if isinstance(action, str) else ""
        return "read" if chosen in READ_ACTIONS else "write"
    return TOOL_SCOPES.get(tool, "read")


def _bad(message: str) -> ToolError:
    return ToolError(message)


def checked[T](check: Callable[..., T], *args: Any) -> T:
    """Run a ``smriti.validation`` check, turning InvalidInput into a tool error."""
    try:
        return check(*args)
    except InvalidInput as exc:
        raise ToolError(str(exc)) from None


def parse_action(value: str) -> str:
    """A manage action: forget, sync, consolidate or stats."""
    chosen = value.strip().lower() if isinstance(value, str) else ""
    if chosen not in MANAGE_ACTIONS:
        raise _bad(f"action must be one of {', '.join(MANAGE_ACTIONS)}; got {str(value)[:40]!r}")
    return chosen


async def run_engine[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a synchronous engine call in a worker thread, mapping errors to tool errors.

    SmritiError (invalid input, unknown id, backend failure...) becomes a tool error with
    its own message. Anything else is a bug: its traceback goes to the log (stderr) and
    the agent gets a generic message.
    """
    try:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
    except SmritiError as exc:
        log.debug("tool call rejected", call=fn.__name__, error=str(exc))
        raise ToolError(str(exc)) from None
    except Exception:
        log.exception("tool call failed unexpectedly", call=fn.__name__)
        raise ToolError(
            f"Smriti hit an internal error during {fn.__name__}; nothing was reported to "
            "you beyond this. The server log (stderr) has the details."
        ) from None


def recall_out(query: str, mode: str, found: dict[str, Any]) -> RecallOut:
    """The structured recall result from what the recall operation returned."""
    items = list(found["results"])
    out: RecallOut = {
        "query": query,
        "mode": mode,
        "count": len(items),
        "results": items,
        "degraded": bool(found.get("degraded")),
    }
    if out["degraded"]:
        out["warning"] = str(found.get("warning", ""))
    return out


def build_server(memory: Service | Engine | Memories) -> MCPServer:
    """An MCP server exposing ``memory`` as the smriti_store/recall/manage tools.

    ``memory`` is a Service (in this process or the store's owner), an open Engine,
    which is served in this process, or the memories of each call's caller
    (``UserMemories``).
    """
    from smriti.engine import Engine
    from smriti.owner.service import LocalService

    if isinstance(memory, Engine):
        engine: Memories = SingleMemory(LocalService(memory))
    elif hasattr(memory, "use"):
        engine = memory  # type: ignore[assignment]
    else:
        engine = SingleMemory(memory)  # type: ignore[arg-type]
    settings = getattr(engine, "settings", None)
    level = (getattr(settings, "log_level", "info") or "info").upper()
    max_limit = getattr(settings, "max_recall_limit", 100)
    from smriti import __version__

    server = SmritiServer(
        "smriti",
        title="Smriti memory",
        version=__version__,
        instructions=SERVER_INSTRUCTIONS,
        log_level=level if level in {"DEBUG", "INFO", "WARNING", "ERROR"} else "INFO",
    )
    _add_store(server, engine)
    _add_recall(server, engine, max_limit)
    _add_manage(server, engine)
    _add_prompt(server)
    return server


def _add_store(server: MCPServer, memories: Memories) -> None:
    @server.tool(
        name="smriti_store",
        title="Store a memory",
        description=STORE_DESCRIPTION,
        annotations=ToolAnnotations(
            title="Store a memory",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    async def smriti_store(
        content: Annotated[str, Field(description="The memory text, self-contained.")],
        importance: ImportanceArg = 0.5,
        tags: TagsArg = "",
        source: Annotated[
            str, Field(description="Where this came from, e.g. 'chat', a URL or file.")
        ] = "",
        ctx: Context | None = None,
    ) -> StoredMemoryOut:
        """Store one memory."""
        value = checked(validation.importance, importance)
        async with memories.use(ctx, "write") as engine:
            stored = await run_engine(
                engine.store, content, importance=value, tags=tags, source=source or None
            )
        return stored  # type: ignore[return-value]


def _add_recall(server: MCPServer, memories: Memories, max_limit: int) -> None:
    @server.tool(
        name="smriti_recall",
        title="Recall memories",
        description=RECALL_DESCRIPTION,
        annotations=ToolAnnotations(
            title="Recall memories",
            # Only access statistics change (SPEC §6.7); the memories themselves do not,
            # so clients may auto-approve it like a read.
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
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
        ctx: Context | None = None,
    ) -> RecallOut:
        """Recall memories."""
        count = checked(validation.limit, limit, max_limit)
        chosen_mode = checked(
            validation.mode, mode.strip().lower() if isinstance(mode, str) else mode
        )
        kind = checked(validation.memory_type, memory_type)
        async with memories.use(ctx, "read") as engine:
            results = await run_engine(
                engine.recall, query or None, limit=count, mode=chosen_mode, memory_type=kind
            )
        if not query.strip():
            chosen_mode = "list"
        return recall_out(query, chosen_mode, results)


def _add_manage(server: MCPServer, memories: Memories) -> None:
    @server.tool(
        name="smriti_manage",
        title="Manage memory",
        description=MANAGE_DESCRIPTION,
        annotations=ToolAnnotations(
            title="Manage memory",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=True,  # sync pushes to a remote backup
        ),
    )
    async def smriti_manage(
        action: Annotated[
            str,
            Field(
                description="forget, stats, consolidate or sync.",
                json_schema_extra={"enum": list(MANAGE_ACTIONS)},
            ),
        ],
        memory_id: Annotated[
            str, Field(description="The id of the memory to forget (action=forget).")
        ] = "",
        ctx: Context | None = None,
    ) -> ManageOut:
        """Manage memory."""
        chosen = parse_action(action)
        async with memories.use(ctx, needed_scope("smriti_manage", {"action": chosen})) as engine:
            return await _manage(engine, chosen, memory_id.strip(), ctx)


async def _manage(
    engine: Service, action: str, memory_id: str, ctx: Context | None = None
) -> ManageOut:
    """Run a manage action. Consolidate and sync report their phases as MCP progress
    notifications when the client sent a progress token (``ctx``)."""
    from smriti.mcp_server.progress import McpProgress

    progress = McpProgress(ctx) if ctx is not None else False
    if action == "forget":
        if not memory_id:
            raise _bad("memory_id is required for action=forget (get ids from smriti_recall)")
        forgotten: ForgottenOut = await run_engine(engine.forget, memory_id)  # type: ignore[assignment]
        return {
            "action": action,
            "message": f"forgot memory {forgotten['id']}",
            "forgotten": forgotten,
        }
    if action == "sync":
        data = await run_engine(engine.sync, progress)
        return {"action": action, "message": str(data.get("message", "")), "sync": data}  # type: ignore[typeddict-item]
    if action == "consolidate":
        done = await run_engine(engine.consolidate, progress)
        return {"action": action, "message": "consolidation done", "consolidation": done}  # type: ignore[typeddict-item]
    stats = await run_engine(engine.stats)
    return {"action": action, "message": f"memory statistics for {engine.user}", "stats": stats}


def _add_prompt(server: MCPServer) -> None:
    @server.prompt(
        name="smriti_system_prompt",
        title="How to use Smriti memory",
        description="System-prompt text telling an agent when and how to store, recall "
        "and forget with Smriti.",
    )
    def smriti_system_prompt() -> str:
        return SYSTEM_PROMPT
