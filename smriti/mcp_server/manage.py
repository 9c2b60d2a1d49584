"""``smriti_manage``: its arguments as one typed request, and the request's answer.

``manage_request`` checks the tool's arguments the way the tool says its errors (which
argument each action needs, named as the tool names it) and builds the typed request
of ``smriti.requests`` for the action; ``answer`` runs it and says what was done. Each
request type has its sentence in ``SAYINGS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.exceptions import ToolError

from smriti import validation
from smriti.errors import InvalidInput
from smriti.mcp_server.schemas import ManageOut
from smriti.requests import (
    RELATED_LIMIT,
    ConsolidateRequest,
    CorrectRequest,
    DuplicatesRequest,
    ForgetRequest,
    GetRequest,
    HistoryRequest,
    ImportTextRequest,
    ManageRequest,
    MergeRequest,
    PurgeRequest,
    RelatedRequest,
    StatsRequest,
    SyncRequest,
    UpdateRequest,
)

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from smriti.owner.service import Service

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
    "import",
)
#: Manage actions that only read; every other one needs the write scope.
READ_ACTIONS = ("get", "history", "related", "stats", "duplicates")
#: Manage actions that act on one memory, named by memory_id.
ID_ACTIONS = ("get", "correct", "history", "update", "related", "forget", "purge", "merge")


def checked[T](check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a check (``smriti.validation``, a request's ``parse``), turning InvalidInput
    into a tool error with its message."""
    try:
        return check(*args, **kwargs)
    except InvalidInput as exc:
        raise ToolError(str(exc)) from None


def parse_action(value: str) -> str:
    """A manage action (one of ``MANAGE_ACTIONS``)."""
    chosen = value.strip().lower() if isinstance(value, str) else ""
    if chosen not in MANAGE_ACTIONS:
        raise ToolError(
            f"action must be one of {', '.join(MANAGE_ACTIONS)}; got {str(value)[:40]!r}"
        )
    return chosen


@dataclass(frozen=True, slots=True)
class ManageArgs:
    """The arguments of one ``smriti_manage`` call, as the client sent them."""

    action: str
    memory_id: object = ""
    content: object = ""
    importance: object = None
    tags: object = None
    limit: object = None
    memory_ids: object = ""
    purge: object = False
    format: object = ""
    dry_run: object = False


def manage_request(args: ManageArgs, principal: str | None, max_limit: int) -> ManageRequest:
    """The typed request for a manage call; a tool error naming the argument that is
    wrong. ``importance``, ``tags`` and ``purge`` are checked whatever the action, as
    the tool always did; ``principal`` is the verified caller (recorded on a correction)."""
    action = parse_action(args.action)
    key = _memory_id(action, args.memory_id)
    weight = None if args.importance is None else checked(validation.importance, args.importance)
    tags = None if args.tags is None else checked(validation.tags, args.tags)
    purging = checked(validation.flag, args.purge, "purge")
    counted = action in ("related", "duplicates") and args.limit is not None
    count = (checked(validation.limit, args.limit, max_limit) if counted else 0) or RELATED_LIMIT
    if action == "correct":
        if not isinstance(args.content, str) or not args.content.strip():
            raise ToolError("content is required for action=correct: the corrected text")
        return checked(
            CorrectRequest.parse, key, args.content, weight, tags, principal=principal,
            purge=purging,
        )  # fmt: skip
    if action == "update":
        if weight is None and tags is None:
            raise ToolError("action=update needs importance or tags (or both)")
        return checked(UpdateRequest.parse, key, weight, tags)
    if action == "merge":
        return checked(MergeRequest.parse, key, merge_ids(args.memory_ids))
    if action == "related":
        return checked(RelatedRequest.parse, key, count)
    if action == "duplicates":
        return DuplicatesRequest(limit=count)
    if action == "import":
        return checked(ImportTextRequest.parse, args.format, _file_text(args.content), args.dry_run)
    return _SIMPLE[action](key)


def _file_text(value: object) -> object:
    """import's ``content``: the SDK hands a string that parses as JSON (a Mem0 or
    mcp-memory-service export, a one-line memory.jsonl) to an untyped argument as the
    parsed value; written back, it is the same document."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return value


def _memory_id(action: str, value: object) -> str:
    """The memory an action names: required (and checked) for ``ID_ACTIONS``."""
    if action not in ID_ACTIONS:
        return ""
    key = value.strip() if isinstance(value, str) else ""
    if not key:
        raise ToolError(f"memory_id is required for action={action} (get ids from smriti_recall)")
    return checked(validation.memory_id, key, action)


#: The actions whose request is made of the memory id alone, or of nothing.
_SIMPLE: dict[str, Callable[[str], ManageRequest]] = {
    "get": GetRequest,
    "history": HistoryRequest,
    "forget": ForgetRequest,
    "purge": PurgeRequest,
    "stats": lambda _: StatsRequest(),
    "consolidate": lambda _: ConsolidateRequest(),
    "sync": lambda _: SyncRequest(),
}


def merge_ids(value: object) -> list[str]:
    """merge's ``memory_ids``: a comma-separated string (or a JSON array) of ids."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ToolError("memory_ids must be a comma-separated string of memory ids")
    ids = [i.strip() for i in items if i.strip()]
    if not ids:
        raise ToolError("memory_ids is required for action=merge: the ids to fold into memory_id")
    return [checked(validation.memory_id, i, "merge") for i in ids]


async def answer(memory: Service, request: ManageRequest, ctx: Context | None) -> ManageOut:
    """Run a manage request and say what was done. Consolidate and sync report their
    phases as MCP progress notifications when the client sent a progress token."""
    from smriti.mcp_server.progress import McpProgress
    from smriti.mcp_server.tools import run_request

    long_running = isinstance(request, ConsolidateRequest | SyncRequest)
    progress = (McpProgress(ctx) if ctx is not None else False) if long_running else None
    data = await run_request(memory, request, progress)
    return SAYINGS[type(request)](request, data, memory)


def _got(request: GetRequest, found: dict[str, Any], memory: Service) -> ManageOut:
    detail = {**found["memory"], **{k: found[k] for k in ("cues", "associations", "versions")}}
    return {"action": "get", "message": f"memory {request.memory_id}", "memory": detail}  # type: ignore[typeddict-item]


def _corrected(request: CorrectRequest, done: dict[str, Any], memory: Service) -> ManageOut:
    message = f"memory {done['superseded']} corrected by {done['new_id']}"
    if request.purge:
        message += f"; {len(done.get('purged', []))} earlier version(s) erased"
    return {"action": "correct", "message": message, "corrected": done}  # type: ignore[typeddict-item]


def _history(request: HistoryRequest, chain: dict[str, Any], memory: Service) -> ManageOut:
    message = f"{len(chain['versions'])} version(s) of memory {request.memory_id}, oldest first"
    return {"action": "history", "message": message, "history": chain}  # type: ignore[typeddict-item]


def _updated(request: UpdateRequest, changed: dict[str, Any], memory: Service) -> ManageOut:
    hidden = ", ".join(str(h["kind"]) for h in changed.get("redacted", []))
    message = f"updated memory {request.memory_id}" + (
        f" (tags redacted: {hidden})" if hidden else ""
    )
    return {"action": "update", "message": message, "updated": changed["memory"]}


def _merged(request: MergeRequest, done: dict[str, Any], memory: Service) -> ManageOut:
    message = f"merged {len(done['merged'])} memories into {request.memory_id}"
    return {"action": "merge", "message": message, "merged": done}  # type: ignore[typeddict-item]


def _related(request: RelatedRequest, linked: dict[str, Any], memory: Service) -> ManageOut:
    message = f"{len(linked['related'])} memories related to {request.memory_id}"
    return {"action": "related", "message": message, "related": linked}  # type: ignore[typeddict-item]


def _purged(request: PurgeRequest, purged: dict[str, Any], memory: Service) -> ManageOut:
    message = (
        f"purged memory {request.memory_id} from the store and its backup; {purged['warning']}"
    )
    return {"action": "purge", "message": message, "purged": purged}  # type: ignore[typeddict-item]


def _forgot(request: ForgetRequest, forgotten: dict[str, Any], memory: Service) -> ManageOut:
    message = f"forgot memory {forgotten['id']}"
    return {"action": "forget", "message": message, "forgotten": forgotten}  # type: ignore[typeddict-item]


def _synced(request: SyncRequest, data: dict[str, Any], memory: Service) -> ManageOut:
    return {"action": "sync", "message": str(data.get("message", "")), "sync": data}  # type: ignore[typeddict-item]


def _consolidated(request: ConsolidateRequest, done: dict[str, Any], memory: Service) -> ManageOut:
    return {"action": "consolidate", "message": "consolidation done", "consolidation": done}  # type: ignore[typeddict-item]


def _duplicates(request: DuplicatesRequest, found: dict[str, Any], memory: Service) -> ManageOut:
    message = (
        f"{len(found['groups'])} group(s) of near-duplicates, {len(found['stale'])} stale memories"
    )
    return {"action": "duplicates", "message": message, "duplicates": found}  # type: ignore[typeddict-item]


def _imported(request: ImportTextRequest, report: dict[str, Any], memory: Service) -> ManageOut:
    if report["dry_run"]:
        message = (
            f"dry run of a {request.fmt} import: {report['records']} record(s), "
            f"{report['stored']} would be stored, {report['already_there']} already there, "
            f"{report['rejected_count']} rejected; nothing was stored"
        )
    else:
        message = (
            f"imported {request.fmt}: {report['stored']} stored, {report['merged']} merged "
            f"into similar memories, {report['already_there']} already there, "
            f"{report['associations']} association(s), {report['rejected_count']} rejected"
        )
    return {"action": "import", "message": message, "imported": report}  # type: ignore[typeddict-item]


def _stats(request: StatsRequest, stats: dict[str, Any], memory: Service) -> ManageOut:
    message = f"memory statistics for {memory.user}"
    return {"action": "stats", "message": message, "stats": stats}  # type: ignore[typeddict-item]


#: What each manage request's answer says: (request, the operation's result, memory).
SAYINGS: dict[type, Callable[[Any, dict[str, Any], Service], ManageOut]] = {
    GetRequest: _got,
    CorrectRequest: _corrected,
    HistoryRequest: _history,
    UpdateRequest: _updated,
    MergeRequest: _merged,
    RelatedRequest: _related,
    PurgeRequest: _purged,
    ForgetRequest: _forgot,
    SyncRequest: _synced,
    ConsolidateRequest: _consolidated,
    DuplicatesRequest: _duplicates,
    StatsRequest: _stats,
    ImportTextRequest: _imported,
}
