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
from pydantic import Field, WithJsonSchema

from smriti import validation
from smriti.errors import InvalidInput, SmritiError
from smriti.logs import get_logger
from smriti.mcp_server.schemas import (
    ForgottenOut,
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

if TYPE_CHECKING:
    from smriti.engine import Engine
    from smriti.owner.service import Service

log = get_logger(__name__)

RECALL_MODES = validation.RECALL_MODES
MANAGE_ACTIONS = (
    "get",
    "correct",
    "history",
    "update",
    "related",
    "duplicates",
    "merge",
    "forget",
    "purge",
    "stats",
    "consolidate",
    "sync",
)
#: Manage actions that only read; every other one needs the write scope.
READ_ACTIONS = ("get", "history", "related", "stats", "duplicates")
#: Manage actions that act on one memory, named by memory_id.
ID_ACTIONS = ("get", "correct", "history", "update", "related", "forget", "purge", "merge")
TAG_MATCHES = validation.TAG_MATCHES
#: The default number of related memories (action=related).
RELATED_LIMIT = 10
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


def _bad(message: str) -> ToolError:
    return ToolError(message)


def checked[T](check: Callable[..., T], *args: Any) -> T:
    """Run a ``smriti.validation`` check, turning InvalidInput into a tool error."""
    try:
        return check(*args)
    except InvalidInput as exc:
        raise ToolError(str(exc)) from None


def parse_action(value: str) -> str:
    """A manage action (one of ``MANAGE_ACTIONS``)."""
    chosen = value.strip().lower() if isinstance(value, str) else ""
    if chosen not in MANAGE_ACTIONS:
        raise _bad(f"action must be one of {', '.join(MANAGE_ACTIONS)}; got {str(value)[:40]!r}")
    return chosen


def client_origin(value: object) -> str:
    """smriti_store's ``origin``: agent (also for empty) or user; a tool error otherwise."""
    text = value.strip().lower() if isinstance(value, str) else value
    if text in ("", None):
        return ORIGIN_AGENT
    if text not in CLIENT_ORIGINS:
        raise _bad(
            f"origin must be agent (what you concluded or wrote down) or user (the user's "
            f"own words), got {str(value)[:40]!r}"
        )
    return str(text)


def moment_text(name: str, value: object) -> str | None:
    """``since``/``until``: an ISO 8601 date or time, checked here; the text itself is
    passed on (it crosses to the owner process as JSON)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise _bad(f"{name} must be an ISO 8601 string, got {type(value).__name__}")
    checked(validation.moment, value, name)
    return value.strip()


def cursor_text(value: object) -> str | None:
    """A list cursor: an opaque string (the engine checks whose and for what it is)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise _bad("cursor must be the next_cursor string of the previous list call")
    return value.strip()


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
        "next_cursor": found.get("next_cursor") or None,
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
    _add_manage(server, engine, max_limit)
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
        value = checked(validation.importance, importance)
        happened = checked(validation.moment, occurred_at, "occurred_at")
        said = client_origin(origin)
        async with memories.use(ctx, "write") as engine:
            stored = await run_engine(
                engine.store,
                content,
                importance=value,
                tags=tags,
                source=source or None,
                occurred_at=happened.isoformat() if happened is not None else None,
                origin=said,
                principal=caller_principal(ctx),
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
                description="list mode: the next_cursor of the previous page, to get the "
                "page after it."
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
    ) -> RecallOut:
        """Recall memories."""
        count = checked(validation.limit, limit, max_limit)
        chosen_mode = checked(
            validation.mode, mode.strip().lower() if isinstance(mode, str) else mode
        )
        kind = checked(validation.memory_type, memory_type)
        filters = {
            "tags": checked(validation.tags, tags or None) or None,
            "tag_match": checked(validation.tag_match, tag_match),
            "since": moment_text("since", since),
            "until": moment_text("until", until),
            "include_superseded": checked(
                validation.flag, include_superseded, "include_superseded"
            ),
            "cursor": cursor_text(cursor),
        }
        if wanted := checked(validation.origin_filter, origin):
            filters["origin"] = wanted
        async with memories.use(ctx, "read") as engine:
            results = await run_engine(
                engine.recall,
                query or None,
                limit=count,
                mode=chosen_mode,
                memory_type=kind,
                **filters,
            )
        if not query.strip():
            chosen_mode = "list"
        return recall_out(query, chosen_mode, results)


def _add_manage(server: MCPServer, memories: Memories, max_limit: int) -> None:
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
                description="get, correct, history, update, related, duplicates, merge, "
                "forget, purge, stats, "
                "consolidate or sync.",
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
            Field(description="correct: the corrected memory text, self-contained."),
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
        ctx: Context | None = None,
    ) -> ManageOut:
        """Manage memory."""
        chosen = parse_action(action)
        request = ManageRequest.parse(
            chosen, memory_id, content, importance, tags, limit, max_limit
        )
        request.memory_ids = merge_ids(chosen, memory_ids)
        request.purge = checked(validation.flag, purge, "purge")
        request.principal = caller_principal(ctx)
        async with memories.use(ctx, needed_scope("smriti_manage", {"action": chosen})) as engine:
            return await _manage(engine, request, ctx)


class ManageRequest:
    """A manage call's arguments, checked at the edge: each action's required ones are
    there, and the values are of the right kind (the engine checks them again)."""

    def __init__(
        self,
        action: str,
        memory_id: str = "",
        content: str = "",
        importance: float | None = None,
        tags: list[str] | None = None,
        limit: int = RELATED_LIMIT,
    ) -> None:
        self.action, self.memory_id, self.content = action, memory_id, content
        self.importance, self.tags, self.limit = importance, tags, limit
        #: merge: the memories to fold into ``memory_id``.
        self.memory_ids: list[str] = []
        #: The verified caller (HTTP with authentication), recorded on a correction.
        self.principal: str | None = None
        #: correct: forget and erase the earlier versions (``smriti.engine.purge``).
        self.purge = False

    @classmethod
    def parse(
        cls,
        action: str,
        memory_id: object,
        content: object,
        importance: object,
        tags: object,
        limit: object,
        max_limit: int,
    ) -> ManageRequest:
        """The request for ``action``; a tool error naming the parameter that is wrong."""
        key = memory_id.strip() if isinstance(memory_id, str) else ""
        if action in ID_ACTIONS and not key:
            raise _bad(f"memory_id is required for action={action} (get ids from smriti_recall)")
        if action in ID_ACTIONS:
            key = checked(validation.memory_id, key, action)
        text = ""
        if action == "correct":
            if not isinstance(content, str) or not content.strip():
                raise _bad("content is required for action=correct: the corrected text")
            text = content
        value = None if importance is None else checked(validation.importance, importance)
        tag_list = None if tags is None else checked(validation.tags, tags)
        if action == "update" and value is None and tag_list is None:
            raise _bad("action=update needs importance or tags (or both)")
        counted = action in ("related", "duplicates") and limit is not None
        count = checked(validation.limit, limit, max_limit) if counted else 0
        return cls(action, key, text, value, tag_list, count or RELATED_LIMIT)


def merge_ids(action: str, value: object) -> list[str]:
    """merge's ``memory_ids``: a comma-separated string (or a JSON array) of ids."""
    if action != "merge":
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise _bad("memory_ids must be a comma-separated string of memory ids")
    ids = [i.strip() for i in items if i.strip()]
    if not ids:
        raise _bad("memory_ids is required for action=merge: the ids to fold into memory_id")
    return [checked(validation.memory_id, i, "merge") for i in ids]


async def _manage(engine: Service, request: ManageRequest, ctx: Context | None = None) -> ManageOut:
    """Run a manage action. Consolidate and sync report their phases as MCP progress
    notifications when the client sent a progress token (``ctx``)."""
    action = request.action
    if action in ID_ACTIONS:
        return await _memory_action(engine, request)
    from smriti.mcp_server.progress import McpProgress

    progress = McpProgress(ctx) if ctx is not None else False
    if action == "sync":
        data = await run_engine(engine.sync, progress)
        return {"action": action, "message": str(data.get("message", "")), "sync": data}  # type: ignore[typeddict-item]
    if action == "consolidate":
        done = await run_engine(engine.consolidate, progress)
        return {"action": action, "message": "consolidation done", "consolidation": done}  # type: ignore[typeddict-item]
    if action == "duplicates":
        found = await run_engine(engine.duplicates, limit=request.limit)
        message = (
            f"{len(found['groups'])} group(s) of near-duplicates, "
            f"{len(found['stale'])} stale memories"
        )
        return {"action": action, "message": message, "duplicates": found}  # type: ignore[typeddict-item]
    stats = await run_engine(engine.stats)
    return {"action": action, "message": f"memory statistics for {engine.user}", "stats": stats}


async def _memory_action(engine: Service, request: ManageRequest) -> ManageOut:
    """The actions on one memory: get, correct, history, update, related, forget."""
    action, key = request.action, request.memory_id
    if action == "get":
        found = await run_engine(engine.get, key)
        detail = {**found["memory"], **{k: found[k] for k in ("cues", "associations", "versions")}}
        return {"action": action, "message": f"memory {key}", "memory": detail}  # type: ignore[typeddict-item]
    if action == "correct":
        done = await run_engine(
            engine.correct, key, request.content, importance=request.importance,
            tags=request.tags, principal=request.principal, purge=request.purge,
        )  # fmt: skip
        message = f"memory {done['superseded']} corrected by {done['new_id']}"
        if request.purge:
            message += f"; {len(done.get('purged', []))} earlier version(s) erased"
        return {"action": action, "message": message, "corrected": done}  # type: ignore[typeddict-item]
    if action == "history":
        chain = await run_engine(engine.history, key)
        message = f"{len(chain['versions'])} version(s) of memory {key}, oldest first"
        return {"action": action, "message": message, "history": chain}  # type: ignore[typeddict-item]
    if action == "update":
        changed = await run_engine(
            engine.update, key, importance=request.importance, tags=request.tags
        )
        hidden = ", ".join(str(h["kind"]) for h in changed.get("redacted", []))
        message = f"updated memory {key}" + (f" (tags redacted: {hidden})" if hidden else "")
        return {"action": action, "message": message, "updated": changed["memory"]}
    if action == "merge":
        done = await run_engine(engine.merge, key, request.memory_ids)
        message = f"merged {len(done['merged'])} memories into {key}"
        return {"action": action, "message": message, "merged": done}  # type: ignore[typeddict-item]
    if action == "related":
        linked = await run_engine(engine.related, key, limit=request.limit)
        message = f"{len(linked['related'])} memories related to {key}"
        return {"action": action, "message": message, "related": linked}  # type: ignore[typeddict-item]
    if action == "purge":
        purged = await run_engine(engine.purge, key)
        message = f"purged memory {key} from the store and its backup; {purged['warning']}"
        return {"action": action, "message": message, "purged": purged}  # type: ignore[typeddict-item]
    forgotten: ForgottenOut = await run_engine(engine.forget, key)  # type: ignore[assignment]
    return {"action": action, "message": f"forgot memory {forgotten['id']}", "forgotten": forgotten}


def _add_prompt(server: MCPServer) -> None:
    @server.prompt(
        name="smriti_system_prompt",
        title="How to use Smriti memory",
        description="System-prompt text telling an agent when and how to store, recall, "
        "correct and forget with Smriti.",
    )
    def smriti_system_prompt() -> str:
        return SYSTEM_PROMPT
