"""Streamable HTTP in front of the SDK's app: who may connect, from where, with what.

``plan_http`` turns the settings into an ``HttpPlan`` before anything is opened, and
refuses what would be unsafe: a non-loopback bind with no authentication. ``AuthGate``
is the ASGI app uvicorn serves when authentication is on. For every request it checks,
in this order:

1. the ``Host`` and ``Origin`` headers against the allowed ones (DNS-rebinding
   protection, on for every bind address: the SDK would turn it off for 0.0.0.0);
2. the bearer token, with the MCP SDK's ``TokenVerifier`` (``smriti.auth``): none or a
   refused one is ``401`` with ``WWW-Authenticate: Bearer error="invalid_token"`` and,
   with OAuth, the ``resource_metadata`` URL of RFC 9728;
3. the scopes: a token with neither the read nor the write scope, or a ``tools/call``
   of a writing tool without the write scope, is ``403`` with
   ``error="insufficient_scope"`` and the scope needed;
4. the body: one that takes longer than ``SMRITI_HTTP_BODY_TIMEOUT`` to arrive is
   ``408`` (the connection is closed), one too large ``413``;
5. the tool-call rate of the caller's user (``smriti.mcp_server.limits``): over it,
   ``429`` with ``Retry-After``;
6. the ``MCP-Protocol-Version`` header: an unsupported one is ``400`` with a JSON-RPC
   error naming the supported versions.

Requests under ``/ui`` (the memory web page, ``smriti.webui``) pass check 1 and then
go to the page, which signs its users in with the same keys or tokens and checks its
own session cookie, CSRF token and Origin.

Then the request goes, through the per-principal session limits
(``smriti.mcp_server.guard``), to the SDK's app with the caller in ``scope["user"]`` and
in the SDK's context variable (``get_access_token()``). Refusals are logged with the
client address and the principal (a refused API key by its id), and written to the
audit log. With OAuth, the protected resource
metadata is served at ``/.well-known/oauth-protected-resource`` (and under the
resource's path, as RFC 9728 places it), without a token.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.auth import ProtectedResourceMetadata
from mcp.types import INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import AnyHttpUrl
from starlette.authentication import AuthCredentials
from starlette.requests import Request

from smriti.audit import AuditLog, audit_path
from smriti.auth.keys import split_key
from smriti.auth.verifier import SmritiTokenVerifier, build_verifier
from smriti.errors import ConfigError
from smriti.logs import get_logger
from smriti.mcp_server.guard import SessionGuard, client_address, too_many
from smriti.mcp_server.limits import HttpLimits
from smriti.mcp_server.tools import needed_scope
from smriti.mcp_server.users import principal_of
from smriti.webui import under_ui

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from smriti.config import Settings

log = get_logger(__name__)

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
#: JSON-RPC error code of a call refused for a missing scope (implementation-defined
#: range of MCP error codes).
FORBIDDEN = -32010
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]


@dataclass(frozen=True)
class HttpPlan:
    """How the HTTP server listens and whom it admits."""

    host: str
    port: int
    #: The MCP endpoint as clients reach it (``SMRITI_PUBLIC_URL``), the resource id.
    resource_url: str
    verifier: SmritiTokenVerifier | None
    security: TransportSecuritySettings
    metadata: ProtectedResourceMetadata | None
    limits: HttpLimits = field(default_factory=HttpLimits)
    #: The audit log's file (``smriti.audit``), None when it is off or there is no
    #: authentication (then every call is the one local user's).
    audit_path: Path | None = None

    @property
    def metadata_url(self) -> str | None:
        """The protected resource metadata URL for ``WWW-Authenticate``, with OAuth."""
        if self.metadata is None:
            return None
        return str(build_resource_metadata_url(AnyHttpUrl(self.resource_url)))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) only accepts connections from this machine."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def plan_http(settings: Settings, host: str, port: int) -> HttpPlan:
    """The HTTP server ``settings`` ask for; ConfigError for an unsafe or incomplete one
    (raised before any memory is opened)."""
    resource_url = settings.public_url or f"http://{_url_host(host)}:{port}{MCP_PATH}"
    verifier = build_verifier(settings, resource_url)
    if verifier is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve {host} without authentication: anyone who reaches the port "
            "could read and forget the memories. Create an API key with `smriti keys "
            "create USER` (clients send it as 'Authorization: Bearer KEY'), or set "
            "SMRITI_OAUTH_ISSUER for OAuth, or bind 127.0.0.1"
        )
    oauth = verifier is not None and verifier.oauth is not None
    if oauth and not settings.public_url and not is_loopback(host):
        raise ConfigError(
            "OAuth needs SMRITI_PUBLIC_URL: the URL clients use to reach this server "
            "(e.g. https://memory.example.com/mcp), the resource its tokens are for"
        )
    metadata = None
    if verifier is not None and verifier.oauth is not None:
        # validated from strings, so that a path-less issuer keeps its exact spelling
        # (issuer identifiers are compared as strings, RFC 8414)
        metadata = ProtectedResourceMetadata.model_validate(
            {
                "resource": resource_url,
                "authorization_servers": [settings.oauth_issuer],
                "scopes_supported": [verifier.scopes.read, verifier.scopes.write],
                "resource_name": "Smriti memory",
            }
        )
    security = transport_security(settings, host, resource_url)
    limits = HttpLimits.from_settings(settings, is_loopback(host))
    audit = audit_path(settings) if verifier is not None else None
    return HttpPlan(host, port, resource_url, verifier, security, metadata, limits, audit)


def transport_security(
    settings: Settings, host: str, resource_url: str
) -> TransportSecuritySettings:
    """DNS-rebinding protection for every bind address: the loopback names, the bound
    address, the public URL's host and ``SMRITI_ALLOWED_HOSTS`` / ``_ORIGINS``."""
    hosts = list(LOOPBACK_HOSTS)
    origins = [f"http://{h}" for h in LOOPBACK_HOSTS]
    if host not in ("0.0.0.0", "::", "") and not is_loopback(host):
        hosts.append(_url_host(host))
    public = urllib.parse.urlsplit(resource_url)
    if settings.public_url and public.hostname:
        hosts.append(public.netloc.rpartition("@")[2])
        origins.append(f"{public.scheme}://{public.netloc.rpartition('@')[2]}")
    hosts.extend(settings.allowed_hosts)
    origins.extend(settings.allowed_origins)
    allowed_hosts: list[str] = []
    for name in hosts:
        # a name without a port matches it with any port too (Host: name:8443)
        has_port = name.rsplit("]", 1)[-1].count(":") == 1
        allowed_hosts += [name] if has_port else [name, f"{name}:*"]
    allowed_origins: list[str] = []
    for origin in origins:
        has_port = urllib.parse.urlsplit(origin).port is not None
        allowed_origins += [origin] if has_port else [origin, f"{origin}:*"]
    if host in ("0.0.0.0", "::") and not (settings.allowed_hosts or settings.public_url):
        log.warning(
            "only loopback Host headers are accepted: set SMRITI_ALLOWED_HOSTS (or "
            "SMRITI_PUBLIC_URL) to the names clients use to reach this server",
            bind=host,
        )
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(allowed_hosts)),
        allowed_origins=list(dict.fromkeys(allowed_origins)),
    )


class AuthGate:
    """The ASGI app in front of the SDK's streamable HTTP app (see the module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        plan: HttpPlan,
        audit: AuditLog | None = None,
        ui: ASGIApp | None = None,
    ) -> None:
        assert plan.verifier is not None
        self.app = app
        #: The memory web page (``smriti.webui``) under ``/ui``: its own sign-in with
        #: the same keys or tokens, a session cookie instead of a bearer header.
        self.ui = ui
        self.inner = AuthContextMiddleware(app)
        self.plan = plan
        self.audit = audit
        self.rate = plan.limits.rate_limiter()
        self.sessions = SessionGuard(self.inner, plan.limits.session_limits(), audit)
        self.verifier = plan.verifier
        self.security = TransportSecurityMiddleware(plan.security)
        self.metadata_paths: set[str] = set()
        if plan.metadata is not None and plan.metadata_url:
            path = urllib.parse.urlsplit(plan.metadata_url).path
            self.metadata_paths = {METADATA_PATH, path}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection (lifespan events go to the SDK's app)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        rejected = await self.security.validate_request(request, is_post=False)
        if rejected is not None:
            await rejected(scope, receive, send)
            return
        if scope["path"] in self.metadata_paths:
            await self._metadata(scope, send)
            return
        if self.ui is not None and under_ui(scope["path"]):
            await self.ui(scope, receive, send)
            return
        await self._authenticated(scope, receive, send)

    async def _authenticated(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _bearer(scope)
        if token is None:
            await self._refuse(send, 401, "invalid_token", "authentication required")
            return
        checked = await self.verifier.check(token)
        if isinstance(checked, str):
            self._refused(scope, 401, checked, key_id=_key_id(token))
            await self._refuse(send, 401, "invalid_token", checked)
            return
        scopes = self.verifier.scopes
        if not {scopes.read, scopes.write} & set(checked.scopes):
            self._refused(scope, 403, "no Smriti scope", checked)
            await self._refuse(send, 403, "insufficient_scope", "no Smriti scope", scopes.read)
            return
        if scope["method"] == "POST":
            body = await read_body(receive, self.plan.limits.body_timeout)
            if not isinstance(body, bytes):
                self._refused(scope, body, "request body too slow or too large", checked)
                await _body_refused(send, body)
                return
            missing, request_id = self._missing_scope(body, checked)
            if missing:
                self._refused(scope, 403, f"needs the {missing} scope", checked)
                await self._refuse(send, 403, "insufficient_scope", "", missing, request_id)
                return
            if await self._rate_limited(scope, send, body, checked):
                return
            receive = _replay(body, receive)
        version = _header(scope, b"mcp-protocol-version")
        if version is not None and version not in SUPPORTED_VERSIONS:
            await _unsupported_version(send, version)
            return
        scope["user"] = AuthenticatedUser(checked)
        scope["auth"] = AuthCredentials(checked.scopes)
        await self.sessions(scope, receive, send, checked)

    async def _rate_limited(
        self, scope: Scope, send: Send, body: bytes, token: AccessToken
    ) -> bool:
        """Whether the tool calls in ``body`` exceed the caller's rate (then 429 is sent)."""
        if self.rate is None:
            return False
        calls, request_id = _tool_calls(body)
        wait = self.rate.take(token.subject or "", calls) if calls else 0
        if not wait:
            return False
        self._refused(scope, 429, "tool call rate limit", token)
        await too_many(send, wait, f"rate limit: retry in {wait} s", request_id)
        return True

    def _refused(
        self,
        scope: Scope,
        status: int,
        reason: str,
        token: AccessToken | None = None,
        key_id: str | None = None,
    ) -> None:
        """Log and audit a refused request: who (never the token itself), from where."""
        principal = principal_of(token) if token is not None else None
        principal = principal or (f"key:{key_id}" if key_id else None)
        client = client_address(scope)
        log.info(
            "request refused",
            status=status,
            reason=reason,
            path=scope["path"],
            principal=principal,
            client=client,
        )
        if self.audit is not None:
            self.audit.record(
                event="refused",
                principal=principal,
                client=client,
                status=status,
                reason=reason,
                user=token.subject if token is not None else None,
            )

    def _missing_scope(self, body: bytes, token: AccessToken) -> tuple[str, Any]:
        """The first scope a tool call in ``body`` needs and ``token`` lacks, with that
        request's id; ("", None) when nothing is missing or the body is not JSON (the
        SDK answers that itself)."""
        try:
            message = json.loads(body)
        except ValueError:
            return "", None
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict) or item.get("method") != "tools/call":
                continue
            params = item.get("params") if isinstance(item.get("params"), dict) else {}
            name = params.get("name") if isinstance(params.get("name"), str) else ""
            wanted = self.verifier.scopes.of(needed_scope(name, params.get("arguments")))
            if wanted not in token.scopes:
                return wanted, item.get("id")
        return "", None

    async def _refuse(
        self,
        send: Send,
        status: int,
        error: str,
        description: str,
        scope: str = "",
        request_id: Any = None,
    ) -> None:
        """A 401 or 403 as RFC 6750 and the MCP authorization spec describe, with a
        JSON-RPC error body that MCP clients show."""
        if error == "insufficient_scope" and not description:
            description = f"this call needs the {scope} scope"
        parts = [f'error="{error}"', f'error_description="{_quoted(description)}"']
        if scope:
            parts.append(f'scope="{scope}"')
        if self.plan.metadata_url:
            parts.append(f'resource_metadata="{self.plan.metadata_url}"')
        message = "unauthorized" if status == 401 else "forbidden"
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": INVALID_REQUEST if status == 401 else FORBIDDEN,
                "message": f"{message}: {description}",
                "data": {"error": error, "error_description": description},
            },
        }
        await _json(
            send, status, body, [(b"www-authenticate", ("Bearer " + ", ".join(parts)).encode())]
        )

    async def _metadata(self, scope: Scope, send: Send) -> None:
        assert self.plan.metadata is not None
        if scope["method"] not in ("GET", "HEAD"):
            await _json(send, 405, {"error": "method not allowed"}, [(b"allow", b"GET, HEAD")])
            return
        data = self.plan.metadata.model_dump(mode="json", exclude_none=True)
        await _json(send, 200, data, [(b"cache-control", b"public, max-age=3600")])


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None or value[:7].lower() != "bearer ":
        return None
    token = value[7:].strip()
    return token or None


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "'")


async def read_body(receive: Receive, timeout: float) -> bytes | int:
    """The whole request body; 413 when it is larger than the SDK would accept, 408
    when it takes longer than ``timeout`` seconds to arrive (a trickling client)."""
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout):
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client left; the SDK sees the same
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > DEFAULT_MAX_REQUEST_BODY_SIZE:
                return 413
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)
    return 408


async def _body_refused(send: Send, status: int) -> None:
    if status == 413:
        await _json(send, 413, {"error": "request body too large"})
        return
    # connection: close, as the rest of the body may still be on its way
    await _json(
        send, 408, {"error": "request body not received in time"}, [(b"connection", b"close")]
    )


def _key_id(token: str) -> str | None:
    """The id of a refused token shaped like an API key (the id is not secret)."""
    parts = split_key(token)
    return parts[0][:32] if parts else None


def _tool_calls(body: bytes) -> tuple[int, Any]:
    """How many ``tools/call`` requests ``body`` holds, and the first one's id."""
    try:
        message = json.loads(body)
    except ValueError:
        return 0, None
    items = message if isinstance(message, list) else [message]
    calls = [i for i in items if isinstance(i, dict) and i.get("method") == "tools/call"]
    return len(calls), calls[0].get("id") if calls else None


def _replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives ``body`` once, then waits on the real one (disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _json(
    send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _unsupported_version(send: Send, version: str) -> None:
    supported = ", ".join(SUPPORTED_VERSIONS)
    await _json(
        send,
        400,
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": UNSUPPORTED_PROTOCOL_VERSION,
                "message": f"unsupported MCP-Protocol-Version {version[:40]!r} (supported: "
                f"{supported})",
                "data": {"supported": list(SUPPORTED_VERSIONS), "requested": version[:40]},
            },
        },
    )


class VersionGate:
    """Without authentication: only the protocol-version check and the body deadline
    of ``AuthGate``."""

    def __init__(self, app: ASGIApp, body_timeout: float = HttpLimits.body_timeout) -> None:
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] == "http":
            version = _header(scope, b"mcp-protocol-version")
            if version is not None and version not in SUPPORTED_VERSIONS:
                await _unsupported_version(send, version)
                return
            if scope["method"] == "POST":
                body = await read_body(receive, self.body_timeout)
                if not isinstance(body, bytes):
                    await _body_refused(send, body)
                    return
                receive = _replay(body, receive)
        await self.app(scope, receive, send)


__all__ = ["AuthGate", "HttpPlan", "VersionGate", "is_loopback", "plan_http"]
