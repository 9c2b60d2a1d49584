"""Whose memory a page shows, and how a page's request reaches it.

Every page asks the memory the same typed requests the tools and the CLI send
(``smriti.requests``), so a change made on the page goes through the engine like a
tool call (history, backups and the audit of the owner follow). Two kinds of access:

- ``LocalAccess`` (``smriti ui``): the one user's memory, reached through the store's
  owner process like any other client.
- ``TeamAccess`` (``/ui`` on ``smriti serve --transport http`` with authentication):
  each session's own user, resolved from the API key or OAuth token its sign-in
  verified, exactly as the MCP endpoint resolves a call's caller. The token is checked
  again on every request, so a revoked key signs its sessions out at once. A memory id
  of another user is not found in the session user's store: 404, never its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

if TYPE_CHECKING:
    from smriti.owner.service import Service
    from smriti.requests import Request
    from smriti.webui.sessions import Session


class SignedOut(Exception):
    """The session's credentials are no longer valid: sign in again."""


class Forbidden(Exception):
    """The session may not do this (e.g. a read-only key asking for a change)."""


class Access(Protocol):
    """How the page reaches the memory of a session."""

    #: Whether sessions sign in with a key (a team server) rather than a one-time link.
    team: bool

    async def run(self, session: Session, request: Request, need: str) -> Any:
        """Run ``request`` on the session user's memory; ``need`` is ``read`` or
        ``write``. Raises SignedOut, Forbidden, or the request's own errors."""
        ...

    def principal(self, session: Session) -> str:
        """Who the session is, recorded on the memories it corrects ("" locally)."""
        ...


class LocalAccess:
    """The memory of the one user ``smriti ui`` was started for."""

    team = False

    def __init__(self, service: Service) -> None:
        self.service = service
        self.user = service.user

    async def run(self, session: Session, request: Request, need: str) -> Any:
        """Run ``request`` in a worker thread (the owner's answer may take a while)."""
        if session.user != self.user:
            raise SignedOut
        return await anyio.to_thread.run_sync(self.service.run, request, False)

    def principal(self, session: Session) -> str:
        """Nobody signed in: the person at the keyboard owns the store."""
        return ""


class TeamAccess:
    """The memories of a team server's signed-in users (``UserMemories``)."""

    team = True

    def __init__(self, memories: Any, verifier: Any, audit: Any = None) -> None:
        #: ``smriti.mcp_server.users.UserMemories``: opens each user's memory once.
        self.memories = memories
        #: ``smriti.auth.verifier.SmritiTokenVerifier``, the MCP endpoint's own.
        self.verifier = verifier
        #: The server's audit log (``smriti.audit.AuditLog``), None when it is off.
        self.audit = audit

    async def sign_in(self, secret: str) -> Any:
        """The verified token for an API key or access token typed into the sign-in
        form, or the reason it is refused (safe to show: it never holds the secret)."""
        checked = await self.verifier.check(secret.strip())
        if isinstance(checked, str):
            return checked
        scopes = self.verifier.scopes
        if not checked.subject or not {scopes.read, scopes.write} & set(checked.scopes):
            return "this key grants no Smriti scope"
        return checked

    async def run(self, session: Session, request: Request, need: str) -> Any:
        """Check the session's token again, then run ``request`` on its user's memory."""
        from mcp.server.mcpserver.exceptions import ToolError

        from smriti.errors import BackendError, SmritiError

        token = await self.verifier.check(session.token.token)
        if isinstance(token, str) or token.subject != session.user:
            raise SignedOut
        if self.verifier.scopes.of(need) not in token.scopes:
            raise Forbidden(f"this key may not {'change' if need == 'write' else 'read'} memories")
        outcome = "failed"
        try:
            async with self.memories.use_token(token, need) as service:
                result = await anyio.to_thread.run_sync(service.run, request, False)
            outcome = "ok"
            return result
        except ToolError as exc:  # the scope was checked above: the memory did not open
            raise BackendError(str(exc)) from None
        except SmritiError:
            outcome = "error"
            raise
        finally:
            self.record(session, request, outcome)

    def refused(self, client: str, reason: str) -> None:
        """Audit a refused sign-in (the reason never holds the key)."""
        if self.audit is not None:
            self.audit.record(
                event="refused", client=client or None, status=401, reason=reason, path="/ui"
            )

    def record(self, session: Session, request: Request, outcome: str) -> None:
        """One audit line per request a page ran, as the MCP endpoint writes one per
        tool call: who, from where, which operation on which memories, how it ended."""
        if self.audit is None:
            return
        named = [getattr(request, "memory_id", None), *getattr(request, "memory_ids", ())]
        self.audit.record(
            principal=self.principal(session) or None,
            user=session.user,
            client=session.client or None,
            tool="web page",
            action=request.op,
            memory_ids=[i for i in named if i] or None,
            outcome=outcome,
        )

    def principal(self, session: Session) -> str:
        """The namespaced principal of the session's key or token (``key:<id>``)."""
        from smriti.mcp_server.users import principal_of

        return principal_of(session.token) or ""
