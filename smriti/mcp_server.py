"""The MCP server: three tools and one prompt over stdio or streamable HTTP.

Tool names and parameters match the reference server (SPEC §4) because MCP clients
already call them: ``smriti_store``, ``smriti_recall`` and ``smriti_manage``. Every tool
result carries structured content with an output schema; every failure is a tool error
(``isError``) whose text a person or an agent can act on, never a traceback.

Nothing here writes to stdout: on the stdio transport stdout is the protocol wire. Logs
go to stderr through structlog (``smriti.logs``).
"""

from __future__ import annotations

import functools
import math
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypedDict

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import Field, WithJsonSchema

from smriti.errors import SmritiError
from smriti.logs import configure_logging, get_logger
from smriti.model import MEMORY_TYPES

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.engine import Engine

log = get_logger(__name__)

RECALL_MODES = ("recall", "search", "list")
MANAGE_ACTIONS = ("forget", "sync", "consolidate", "stats")
Transport = Literal["stdio", "http"]

# --------------------------------------------------------------------------- schemas


class CueOut(TypedDict):
    """A cue (retrieval hook) the memory was linked to."""

    name: str
    type: str


class StoredMemoryOut(TypedDict):
    """The memory that was stored."""

    id: str
    summary: str
    memory_type: str
    importance: float
    tags: list[str]
    source: str
    created_at: str
    cues: list[CueOut]
    associations: int
    cluster_id: int


class RecalledMemoryOut(TypedDict):
    """One recalled memory, its score and how it was found."""

    id: str
    content: str
    summary: str
    memory_type: str
    importance: float
    tags: list[str]
    source: str
    created_at: str
    last_accessed_at: str
    access_count: int
    cluster_id: int
    score: float
    match_type: str
    hop: int


class RecallOut(TypedDict):
    """Recall results, best first."""

    query: str
    mode: str
    count: int
    results: list[RecalledMemoryOut]


class ForgottenOut(TypedDict):
    """The memory that was deleted."""

    id: str
    summary: str
    memory_type: str
    created_at: str


class SyncOut(TypedDict):
    """What a backup sync did."""

    provider: str
    pushed: list[str]
    skipped: int
    message: str


class ConsolidationOut(TypedDict):
    """What a consolidation run did."""

    decayed: int
    pruned: int
    strengthened: int
    orphan_cues_removed: int
    clusters: int
    reclustered: NotRequired[int]
    indexes_created: list[str]
    seconds: float


class ManageOut(TypedDict):
    """The outcome of a management action; one of the optional keys is set."""

    action: str
    message: str
    forgotten: NotRequired[ForgottenOut]
    sync: NotRequired[SyncOut]
    consolidation: NotRequired[ConsolidationOut]
    stats: NotRequired[dict[str, Any]]


# Numbers arrive unconverted (``Any``) so that this edge, not the SDK's coercion, decides
# what a bad value means: "abc", NaN, true and 1e309 each get a message naming the
# parameter. The published schema still says "number"/"integer".
ImportanceArg = Annotated[
    Any,
    WithJsonSchema({"type": "number", "minimum": 0.0, "maximum": 1.0}),
    Field(
        description="How important the memory is, 0.0 (trivia) to 1.0 (critical). "
        "Important memories rank higher and are never pruned by decay."
    ),
]
# Agents sometimes send tags as a JSON array although the schema says string; accept both
# (the engine validates either form).
TagsArg = Annotated[
    Any,
    WithJsonSchema({"type": "string"}),
    Field(description="Comma-separated tags, e.g. 'work, project-x'."),
]
LimitArg = Annotated[
    Any,
    WithJsonSchema({"type": "integer", "minimum": 1}),
    Field(description="Maximum number of memories to return (at least 1)."),
]

# --------------------------------------------------------------------------- texts

SERVER_INSTRUCTIONS = """\
Smriti is your long-term memory across conversations. Call smriti_recall with a short \
query before answering questions that may depend on what you learned earlier (the \
user's preferences, projects, people, decisions). Call smriti_store when you learn \
something worth keeping: one self-contained fact or event per call. Use smriti_manage \
to forget a wrong or outdated memory by id."""

SYSTEM_PROMPT = """\
You have a persistent, associative long-term memory (Smriti). It survives across \
conversations and works like human memory: memories are linked by shared cues \
(people, places, topics) and by meaning, frequently used memories get stronger, and \
unused unimportant ones fade.

When to RECALL (smriti_recall):
- At the start of a task or conversation, recall what you know about the user and the \
topic ("user preferences", "project X architecture").
- Before answering anything that may depend on earlier sessions: names, preferences, \
decisions, past problems and their fixes.
- Use short, specific queries (a few key nouns). mode="recall" (default) follows \
associations and finds related memories; mode="search" is pure semantic similarity; \
mode="list" (or an empty query) shows the most recently used memories. Filter with \
memory_type when you only want facts ("semantic"), events ("episodic") or how-tos \
("procedural").
- Treat recalled content as notes you wrote earlier: useful, possibly outdated. \
Results with a higher hop were reached by association, not by direct match.

When to STORE (smriti_store):
- When the user states a preference, a fact about themselves or their work, a decision, \
a deadline, or asks you to remember something.
- When you solve a problem in a way worth reusing (store the procedure).
- One self-contained fact or event per call, written so it makes sense on its own \
months later: name who and what ("Priya prefers tabs over spaces in Go code"), not \
"she prefers tabs".
- Set importance: 0.9-1.0 for things the user explicitly asks you to remember or that \
would be costly to forget; 0.5 for ordinary facts; 0.1-0.3 for passing details.
- Add a few comma-separated tags (project or topic names) and a source if it helps.
- Do not store secrets (passwords, API keys, tokens), transient chatter, or things \
already stored: recall first if unsure.

When to FORGET (smriti_manage action="forget", memory_id=...):
- When the user asks you to forget something, or a memory is wrong or superseded. \
Recall it first to get its id, forget it, then store the corrected version.

Other actions of smriti_manage: "stats" (what is stored), "consolidate" (decay, prune \
and re-cluster now; it also runs periodically) and "sync" (push a backup now).

Never tell the user you "cannot remember things between conversations": you can, with \
these tools."""

STORE_DESCRIPTION = """\
Store one memory in long-term memory. Write the content so it stands on its own later \
(name people, projects and dates explicitly). Smriti summarises it, classifies it \
(episodic event, semantic fact or procedural how-to), extracts cues (entities, \
keywords, concepts) and links it to related memories. Returns the stored memory with \
its id, summary, type, cues and number of associations. Do not store secrets."""

RECALL_DESCRIPTION = """\
Recall memories relevant to a query, best first. mode "recall" (default) combines cue \
matching, semantic and lexical search and follows associations up to two hops; \
"search" is semantic similarity only; "list" (or an empty query) returns the most \
recently used memories. memory_type filters to episodic, semantic or procedural \
before the limit. Each result has id, content, summary, memory_type, importance, \
tags, source, created_at, score, match_type (cue, vector, lexical, association or \
list) and hop. Read-only for your data: in "recall" mode it only refreshes the \
returned memories' access statistics (so used memories decay slower)."""

MANAGE_DESCRIPTION = """\
Manage memory. action "forget" permanently deletes the memory with memory_id (get ids \
from smriti_recall); an unknown id is an error. "stats" reports what is stored. \
"consolidate" runs decay, pruning of weak unimportant memories, and clustering now. \
"sync" pushes a backup now (if a backup provider is configured)."""

# --------------------------------------------------------------------------- validation


def _bad(message: str) -> ToolError:
    return ToolError(message)


def parse_importance(value: Any) -> float | str:
    """A finite importance in [0, 1]; a non-numeric string is left to the engine.

    The engine may accept words (e.g. "high") and raises InvalidInput otherwise.
    """
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            if not text:
                raise _bad("importance must be a number from 0.0 to 1.0, got ''") from None
            return text
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = "null" if value is None else repr(value)[:40]
        raise _bad(f"importance must be a number from 0.0 to 1.0, got {shown}")
    value = float(value)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise _bad(f"importance must be a number from 0.0 to 1.0, got {value!r}")
    return value


def parse_limit(value: Any, maximum: int | None) -> int:
    """A whole number from 1 to ``maximum`` (strings of digits accepted)."""
    shown = repr(value)[:40]
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise _bad(f"limit must be a whole number of at least 1, got {shown}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"limit must be a whole number of at least 1, got {shown}")
    if value < 1 or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise _bad(f"limit must be at least 1{upper}, got {value}")
    return value


def parse_choice(name: str, value: str, allowed: tuple[str, ...], *, blank_ok: bool) -> str:
    """``value`` trimmed and lower-cased if it is one of ``allowed`` (or blank when allowed)."""
    chosen = value.strip().lower()
    if (blank_ok and not chosen) or chosen in allowed:
        return chosen
    raise _bad(f"{name} must be one of {', '.join(allowed)}; got {value[:40]!r}")


# --------------------------------------------------------------------------- engine calls


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


def _forgotten(engram: Any) -> ForgottenOut:
    created = engram.created_at
    return {
        "id": engram.id,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "created_at": created.isoformat() if hasattr(created, "isoformat") else str(created),
    }


# --------------------------------------------------------------------------- server


class SmritiServer(MCPServer):
    """MCPServer whose stdio transport can be stopped by SIGTERM while waiting for input.

    The SDK reads stdin in a worker thread that a cancellation cannot interrupt, so a
    server idle on stdin would ignore SIGTERM until the next message. Here stdin is read
    only after the event loop reports it readable, so cancellation is immediate.
    """

    async def run_stdio_async(self) -> None:
        """Serve MCP over stdin/stdout until stdin closes or the task is cancelled."""
        async with stdio_server(stdin=_CancellableStdin()) as (read_stream, write_stream):  # type: ignore[arg-type]
            lowlevel = self._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _CancellableStdin:
    """Async iterator of UTF-8 lines from file descriptor 0 that cancellation can stop."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False
        self.pollable = sys.platform != "win32"

    def __aiter__(self) -> _CancellableStdin:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.buffer and not self.eof:
            chunk = await self._read()
            self.eof = not chunk
            self.buffer += chunk
        if not self.buffer:
            raise StopAsyncIteration
        line, sep, self.buffer = self.buffer.partition(b"\n")
        return (line + sep).decode("utf-8", errors="replace")

    async def _read(self) -> bytes:
        if self.pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:  # regular files and /dev/null cannot be polled; reads never block
                self.pollable = False
        if self.pollable:
            return os.read(self.fd, 65536)
        return await anyio.to_thread.run_sync(os.read, self.fd, 65536)


def build_server(engine: Engine) -> MCPServer:
    """An MCP server exposing ``engine`` as the smriti_store/recall/manage tools."""
    settings = getattr(engine, "settings", None)
    level = (getattr(settings, "log_level", "info") or "info").upper()
    max_limit = getattr(settings, "max_recall_limit", None)
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


def _add_store(server: MCPServer, engine: Engine) -> None:
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
    ) -> StoredMemoryOut:
        """Store one memory."""
        value = parse_importance(importance)
        outcome = await run_engine(
            engine.store, content, importance=value, tags=tags, source=source or None
        )
        return outcome.to_dict()  # type: ignore[return-value]


def _add_recall(server: MCPServer, engine: Engine, max_limit: int | None) -> None:
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
    ) -> RecallOut:
        """Recall memories."""
        count = parse_limit(limit, max_limit)
        chosen_mode = parse_choice("mode", mode, RECALL_MODES, blank_ok=True) or "recall"
        kind = parse_choice("memory_type", memory_type, MEMORY_TYPES, blank_ok=True)
        results = await run_engine(
            engine.recall, query or None, limit=count, mode=chosen_mode, memory_type=kind or None
        )
        if not query.strip():
            chosen_mode = "list"
        items = [r.to_dict() for r in results]
        return {"query": query, "mode": chosen_mode, "count": len(items), "results": items}  # type: ignore[typeddict-item]


def _add_manage(server: MCPServer, engine: Engine) -> None:
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
    ) -> ManageOut:
        """Manage memory."""
        chosen = parse_choice("action", action, MANAGE_ACTIONS, blank_ok=False)
        return await _manage(engine, chosen, memory_id.strip())


async def _manage(engine: Engine, action: str, memory_id: str) -> ManageOut:
    if action == "forget":
        if not memory_id:
            raise _bad("memory_id is required for action=forget (get ids from smriti_recall)")
        engram = await run_engine(engine.forget, memory_id)
        return {
            "action": action,
            "message": f"forgot memory {engram.id}",
            "forgotten": _forgotten(engram),
        }
    if action == "sync":
        report = await run_engine(engine.sync)
        data = report.to_dict()
        return {"action": action, "message": str(data.get("message", "")), "sync": data}  # type: ignore[typeddict-item]
    if action == "consolidate":
        done = (await run_engine(engine.consolidate)).to_dict()
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


# --------------------------------------------------------------------------- running


class _Shutdown(BaseException):
    """SIGTERM/SIGINT arrived before the event loop was running."""


_stop_requested = threading.Event()


def _raise_shutdown(signum: int, frame: object) -> None:
    raise _Shutdown(signum)


def _note_signal(signum: int, frame: object) -> None:
    _stop_requested.set()
    log.info("signal received; shutting down", signal=signal.Signals(signum).name)


def _set_signal_handlers(handler: Any) -> dict[int, Any]:
    """Install ``handler`` for SIGTERM and SIGINT; returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}  # only the main thread may set handlers (e.g. run in a test thread)
    return {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}


def run_server(
    settings: Settings,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
) -> int:
    """Open the engine, serve MCP until stdin EOF or SIGTERM/SIGINT, close, return 0.

    Logging is configured to stderr first; stdout carries only protocol. The engine is
    always closed (flush and final backup sync) before returning. Errors while opening
    (ConfigError, BackendError, ...) propagate after cleanup.
    """
    configure_logging(settings.log_level)
    from smriti.engine import Engine

    _stop_requested.clear()
    # Until the event loop runs, a signal interrupts whatever is happening (e.g. a slow
    # restore); afterwards the loop (stdio) or uvicorn (HTTP) handles it.
    previous = _set_signal_handlers(_raise_shutdown)
    engine: Engine | None = None
    try:
        engine = Engine.from_settings(settings)
        engine.open()
        server = build_server(engine)
        _set_signal_handlers(_note_signal)
        engine.start_background()
        log.info("serving", transport=transport, user=engine.user)
        if transport == "stdio" and sys.stdin.isatty():
            log.warning("waiting for an MCP client on stdin; see `smriti --help` for commands")
        anyio.run(_serve, server, transport, host, port)
    except _Shutdown:
        log.info("signal received before serving started")
    finally:
        _set_signal_handlers(_note_signal)  # a second signal must not cut the close short
        if engine is not None:
            log.info("shutting down")
            engine.stop_background()
            engine.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("stopped")
    return 0


async def _serve(server: MCPServer, transport: Transport, host: str, port: int) -> None:
    async with anyio.create_task_group() as tg:
        if transport == "stdio":
            # uvicorn handles signals itself for HTTP; stdio needs our own handler.
            await tg.start(_cancel_on_signal, tg.cancel_scope)
            if _stop_requested.is_set():
                tg.cancel_scope.cancel()
            await server.run_stdio_async()
            log.info("stdin closed")
        else:
            await _serve_http(server, host, port)
        tg.cancel_scope.cancel()


async def _cancel_on_signal(scope: anyio.CancelScope, *, task_status: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            log.info("signal received", signal=signal.Signals(signum).name)
            scope.cancel()
            return


async def _serve_http(server: MCPServer, host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(host=host)
    # log_config=None: uvicorn's loggers propagate to the root logger on stderr
    # (its default config would write access lines to stdout).
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)
    log.info("listening", url=f"http://{host}:{port}/mcp")
    await uvicorn.Server(config).serve()
