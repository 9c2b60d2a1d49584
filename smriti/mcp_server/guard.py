"""The per-principal limits and the audit record, wired into the HTTP server.

``SessionGuard`` applies ``smriti.mcp_server.limits.SessionLimits`` to the requests
``AuthGate`` has authenticated: it admits (or refuses with 429) a request that would
open a session, closes the principal's oldest idle sessions to make room, and follows
the sessions' requests to know which are busy. ``AuditCalls`` is MCP server middleware
that writes one audit line per tool call (``smriti.audit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.shared.exceptions import MCPError
from starlette.authentication import AuthCredentials

from smriti.audit import AuditLog, memory_ids
from smriti.logs import get_logger
from smriti.mcp_server.limits import Session, SessionLimits
from smriti.mcp_server.users import principal_of

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = get_logger(__name__)

SESSION_HEADER = b"mcp-session-id"
#: JSON-RPC error code of a call refused by a limit (implementation-defined range).
LIMITED = -32029


def client_address(scope: Mapping[str, Any]) -> str | None:
    """``host:port`` of the peer of an ASGI scope (the proxy's, behind one)."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


def credential_of(token: AccessToken) -> str:
    """The credential a session cap counts: the key (``key:<id>``) or OAuth subject."""
    return principal_of(token) or token.client_id


class SessionGuard:
    """Sessions per principal in front of the SDK's session manager (``app``)."""

    def __init__(self, app: ASGIApp, limits: SessionLimits, audit: AuditLog | None) -> None:
        self.app = app
        self.limits = limits
        self.audit = audit

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, token: AccessToken
    ) -> None:
        """Serve one authenticated request."""
        session_id = _header(scope, SESSION_HEADER)
        if session_id is not None:
            await self._in_session(session_id, scope, receive, send)
        elif scope["method"] == "POST":
            await self._opening(token, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _in_session(
        self, session_id: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        session = self.limits.begin(session_id)
        status: list[int] = []
        try:
            await self.app(scope, receive, _watch(send, status, []))
        finally:
            if session is not None:
                done = bool(status) and (
                    status[0] == 404 or (scope["method"] == "DELETE" and status[0] < 400)
                )
                self.limits.end(session, gone=done)

    async def _opening(
        self, token: AccessToken, scope: Scope, receive: Receive, send: Send
    ) -> None:
        user, credential = token.subject or "", credential_of(token)
        decision = self.limits.admit(user, credential)
        if decision.refused:
            log.warning(
                "new session refused",
                principal=credential,
                user=user,
                reason=decision.reason,
                client=client_address(scope),
            )
            if self.audit is not None:
                self.audit.record(
                    event="refused",
                    principal=credential,
                    user=user,
                    client=client_address(scope),
                    status=429,
                    reason=decision.reason,
                )
            await too_many(send, decision.retry_after, f"too many open sessions: {decision.reason}")
            return
        for old in decision.evict:
            await self._close(old, scope)
        status: list[int] = []
        opened: list[str] = []
        try:
            await self.app(scope, receive, _watch(send, status, opened))
        finally:
            if opened and status and status[0] < 400:
                owner = scope.get("user")
                self.limits.opened(opened[0], user, credential, owner)
            else:
                self.limits.abandoned(user, credential)

    async def _close(self, session: Session, scope: Scope) -> None:
        """End ``session`` as its client would: ``DELETE`` with its own credential."""
        headers = [
            (k, v)
            for k, v in scope.get("headers", [])
            if k.lower() not in (SESSION_HEADER, b"content-length", b"content-type")
        ]
        owner = session.owner
        closing = {
            **scope,
            "method": "DELETE",
            "headers": [*headers, (SESSION_HEADER, session.id.encode())],
            "user": owner,
            "auth": AuthCredentials(owner.scopes if isinstance(owner, AuthenticatedUser) else []),
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        status: list[int] = []
        await self.app(closing, receive, _watch(_discard, status, []))
        log.info(
            "idle session closed to make room",
            session=session.id[:8],
            user=session.user,
            principal=session.credential,
            status=status[0] if status else None,
        )


async def _discard(message: Message) -> None:
    return None


def _watch(send: Send, status: list[int], opened: list[str]) -> Send:
    """``send`` that notes the response's status and the session id it opens."""

    async def watched(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(int(message["status"]))
            for key, value in message.get("headers", []):
                if key.lower() == SESSION_HEADER:
                    opened.append(value.decode("latin-1"))
        await send(message)

    return watched


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def too_many(send: Send, retry_after: int, message: str, request_id: Any = None) -> None:
    """A ``429`` with ``Retry-After`` and a JSON-RPC error body."""
    import json

    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": LIMITED, "message": message, "data": {"retry_after": retry_after}},
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(retry_after).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class AuditCalls:
    """MCP server middleware: one audit line per ``tools/call`` and per
    ``resources/read`` (never their content)."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        """Run the call, then record who made it, on what, and how it ended."""
        if ctx.method == "resources/read":
            return await self._read(ctx, call_next)
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        arguments = params.get("arguments") if isinstance(params.get("arguments"), Mapping) else {}
        entry = {
            **_caller(ctx),
            "tool": str(params.get("name", ""))[:64],
            "action": _action(params.get("name"), arguments),
        }
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            self.audit.record(**entry, outcome=f"failed: {type(exc).__name__}")
            raise
        error, structured = _result(result)
        ids = memory_ids(arguments, structured)
        self.audit.record(**entry, memory_ids=ids, outcome="error" if error else "ok")
        return result

    async def _read(self, ctx: Any, call_next: Any) -> Any:
        """A resource read: which resource (a memory's id, never the URI as sent)."""
        from smriti.mcp_server.resources import audited

        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        action, ids = audited(params.get("uri"))
        entry = {**_caller(ctx), "tool": "resources/read", "action": action, "memory_ids": ids}
        try:
            result = await call_next(ctx)
        except MCPError:
            self.audit.record(**entry, outcome="error")
            raise
        except BaseException as exc:
            self.audit.record(**entry, outcome=f"failed: {type(exc).__name__}")
            raise
        self.audit.record(**entry, outcome="ok")
        return result


def _caller(ctx: Any) -> dict[str, Any]:
    """Who made the request of ``ctx``: principal, user and client address."""
    scope = getattr(getattr(ctx, "request", None), "scope", None) or {}
    user = scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    return {
        "principal": principal_of(token),
        "user": token.subject if token is not None else None,
        "client": client_address(scope),
    }


def _action(tool: Any, arguments: Mapping[str, Any]) -> str | None:
    """What the call did: store, a recall mode, or a manage action (never arguments)."""
    if tool == "smriti_store":
        return "store"
    key, default = {"smriti_manage": ("action", None), "smriti_recall": ("mode", "recall")}.get(
        str(tool), ("", None)
    )
    value = arguments.get(key) if key else None
    if isinstance(value, str) and value.strip():
        return value.strip().lower()[:20]
    return default


def _result(result: Any) -> tuple[bool, Any]:
    """(is an error, structured content) of a tool result, model or dict."""
    if isinstance(result, Mapping):
        return bool(result.get("isError")), result.get("structuredContent")
    return bool(getattr(result, "is_error", False)), getattr(result, "structured_content", None)
