"""A stdio transport that SIGTERM can stop while the server waits for input, and that
answers every request already read before it stops on stdin EOF."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import anyio
from mcp import types
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from smriti.logs import get_logger
from smriti.mcp_server.arguments import argument_problems
from smriti.mcp_server.early import EarlyInitialize

if TYPE_CHECKING:
    from smriti.mcp_server.users import Memories

log = get_logger(__name__)

#: On stdin EOF, how long requests already read may still take to be answered.
EOF_GRACE_SECONDS = 10.0


class SmritiServer(MCPServer):
    """MCPServer whose stdio transport can be stopped by SIGTERM while waiting for input.

    The SDK reads stdin in a worker thread that a cancellation cannot interrupt, so a
    server idle on stdin would ignore SIGTERM until the next message. Here stdin is read
    only after the event loop reports it readable, so cancellation is immediate.

    A client may write a burst of requests and close stdin at once (``smriti <
    requests.jsonl``). The SDK cancels in-flight handlers when input ends, so the
    effects of those requests (stored memories) would be applied but their replies
    lost. Here the end of input is held back until every request read has been
    answered, for at most ``eof_grace`` seconds.

    The SDK drops a line it cannot parse without a word, so a request holding a lone
    surrogate was never answered; here every such line gets a JSON-RPC error, with the
    request's id when the line has one. A client that closes stdout ends the session
    (exit 0), as closing stdin does.
    """

    eof_grace: float = EOF_GRACE_SECONDS
    #: The memory the tools serve (``smriti.mcp_server.tools.build_server`` sets it).
    memories: Memories | None = None

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        """The resource ``uri``, read for the caller of ``context``
        (``smriti.mcp_server.resources.read_resource``)."""
        from smriti.mcp_server.resources import read_resource

        return await read_resource(self, uri, context, super().read_resource)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        """The prompt ``name``; an unknown name or bad arguments are a JSON-RPC
        invalid-params error (the SDK would answer code 0 and log a traceback)."""
        if self._prompt_manager.get_prompt(name) is None:
            known = ", ".join(p.name for p in await self.list_prompts())
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name[:80]!r} (available: {known})")
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call tool ``name``; arguments that do not fit its signature (a required one
        missing, a wrong type) are a tool error saying which and what it is for, where
        the SDK would pass on pydantic's report."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            tool = self._tool_manager.get_tool(name)
            if not isinstance(exc.__cause__, ValidationError) or tool is None:
                raise
            problems = argument_problems(exc.__cause__, tool.parameters)
            raise ToolError(f"Error executing tool {name}: {problems}") from None

    #: The reader that may have answered ``initialize`` before the SDK was imported
    #: (``smriti.mcp_server.early``); what it read is read here first.
    early: EarlyInitialize | None = None

    async def run_stdio_async(self) -> None:
        """Serve MCP over stdin/stdout until stdin closes (and the requests read are
        answered) or the task is cancelled."""
        pending = _Pending()
        stdin = _CancellableStdin(pending=pending, grace=self.eof_grace)
        answered = None
        if self.early is not None:
            early = self.early.finish()
            stdin.buffer, stdin.eof, answered = early.read, early.eof, early.answered
        try:
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
                lowlevel = self._lowlevel_server
                tracked = _AnswerTracking(write_stream, pending, answered)
                stdin.reject = tracked.send  # set before the reader task first runs
                options = lowlevel.create_initialization_options()
                await lowlevel.run(read_stream, tracked, options)  # type: ignore[arg-type]
        except* BrokenPipeError:
            # The client closed our stdout (it quit, e.g. right after ``initialize``):
            # nobody is left to answer, which is the end of the session, not a failure.
            log.info("stdout closed by the client; stopping")


class _Pending:
    """Ids of the requests read from stdin that have not been answered yet."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self._changed = anyio.Event()

    def read(self, message: types.JSONRPCMessage) -> None:
        """Note the request (or cancellation) in one message read."""
        if isinstance(message, types.JSONRPCRequest):
            self.ids.add(message.id)
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):
            key = (message.params or {}).get("requestId")
            if isinstance(key, int | str):
                self._settle(key)  # a cancelled request gets no reply

    def answered(self, message: Any) -> None:
        """Note an outgoing message; a response or error settles its request."""
        key = getattr(message, "id", None)
        if key is not None and getattr(message, "method", None) is None:
            self._settle(key)

    def _settle(self, key: Any) -> None:
        self.ids.discard(key)
        self._changed.set()
        self._changed = anyio.Event()

    async def drained(self, grace: float) -> int:
        """Wait until every request read is answered, at most ``grace`` seconds;
        returns how many are still unanswered."""
        with anyio.move_on_after(grace):
            while self.ids:
                await self._changed.wait()
        return len(self.ids)


class _AnswerTracking:
    """The server's write stream, telling ``pending`` about each message once sent."""

    def __init__(self, inner: Any, pending: _Pending, answered: int | str | None = None) -> None:
        self._inner = inner
        self._pending = pending
        #: The id of a request answered before the SDK ran, whose answer is not sent again.
        self._answered = answered

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if self._answered is not None and _is_answer_to(message, self._answered):
            self._answered = None  # the client has this answer already
        else:
            await self._inner.send(item)
        self._pending.answered(message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _AnswerTracking:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.aclose()


def _is_answer_to(message: Any, key: int | str) -> bool:
    """Whether ``message`` is the response (or error) to the request with id ``key``."""
    found = getattr(message, "id", None)
    return found == key and type(found) is type(key) and getattr(message, "method", None) is None


class _CancellableStdin:
    """Async iterator of UTF-8 lines from file descriptor 0 that cancellation can stop."""

    def __init__(self, fd: int = 0, pending: _Pending | None = None, grace: float = 0.0) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False
        self.pollable = sys.platform != "win32"
        self.pending = pending
        self.grace = grace
        #: Sends the error answer to a line that is no JSON-RPC message (set by the
        #: server once its write stream exists; without it such lines are only logged).
        self.reject: Any = None

    def __aiter__(self) -> _CancellableStdin:
        return self

    async def __anext__(self) -> str:
        """The next line that is a JSON-RPC message; lines that are not are answered
        with a JSON-RPC error here (the SDK would drop them silently, leaving a client
        waiting for an answer forever) and not passed on."""
        while True:
            while b"\n" not in self.buffer and not self.eof:
                chunk = await self._read()
                self.eof = not chunk
                self.buffer += chunk
            if not self.buffer:
                await self._settle_pending()
                raise StopAsyncIteration
            line, sep, self.buffer = self.buffer.partition(b"\n")
            text = (line + sep).decode("utf-8", errors="replace")
            if not text.strip():
                continue  # a blank line between messages is no message
            message = _parse(text)
            if isinstance(message, types.JSONRPCError):
                await self._reject(message)
                continue
            if self.pending is not None:
                self.pending.read(message)
            return text

    async def _reject(self, error: types.JSONRPCError) -> None:
        log.warning(
            "stdin line is not a JSON-RPC message; answered with an error",
            code=error.error.code,
            reason=error.error.message,
            request_id=error.id,
        )
        if self.reject is not None:
            await self.reject(SessionMessage(error))

    async def _settle_pending(self) -> None:
        """At EOF: let the requests already read be answered before input ends."""
        if self.pending is None or not self.pending.ids:
            return
        waiting = len(self.pending.ids)
        log.info("stdin closed; answering the requests already read", requests=waiting)
        left = await self.pending.drained(self.grace)
        if left:
            log.warning(
                "stdin closed; gave up waiting for requests", unanswered=left, grace_s=self.grace
            )

    async def _read(self) -> bytes:
        if self.pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:  # regular files and /dev/null cannot be polled; reads never block
                self.pollable = False
        if self.pollable:
            return os.read(self.fd, 65536)
        return await anyio.to_thread.run_sync(os.read, self.fd, 65536)


def _parse(text: str) -> types.JSONRPCMessage | types.JSONRPCError:
    """``text`` read as the SDK reads it: the message, or the error to answer it with.

    The error carries the request's id when the line is JSON with one, so a client
    waiting for that request gets its answer; otherwise the id is null (JSON-RPC 2.0).
    """
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        failure = exc
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):  # deep nesting overflows the decoder's stack
        return _error(None, PARSE_ERROR, "Parse error: the line is not valid JSON")
    key = raw.get("id") if isinstance(raw, dict) else None
    key = key if isinstance(key, int | str) and not isinstance(key, bool) else None
    try:
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _error(key, PARSE_ERROR, _SURROGATE)
    except RecursionError:
        return _error(key, PARSE_ERROR, "Parse error: the message is nested too deeply")
    reason = failure.errors()[0]["msg"] if hasattr(failure, "errors") else str(failure)
    return _error(key, INVALID_REQUEST, f"Invalid request: {reason[:200]}")


_SURROGATE = (
    "Parse error: a string in the message holds a lone UTF-16 surrogate escape (such "
    "as \\ud800), which is not Unicode text; send valid UTF-8, or escape characters "
    "outside the Basic Multilingual Plane as a surrogate pair"
)


def _error(key: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=key, error=types.ErrorData(code=code, message=message)
    )
