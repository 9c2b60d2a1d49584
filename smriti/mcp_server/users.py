"""Whose memory a tool call uses: one fixed user (stdio, HTTP without authentication), or
the verified caller of each call (HTTP with API keys or OAuth).

``UserMemories`` opens a user's memory (``smriti.owner.service.open_service`` with
ACCESSING_USER replaced by the caller) on the first call that needs it and keeps up to
``SMRITI_MAX_LOADED_USERS`` open, closing the least recently used one that has no call
under way when one more is needed. A user's working set counts against the process's
memory budget (``SMRITI_WORKING_SET_MB``) as before, which evicts working sets on its
own. Calls run side by side: nothing here is held while a call runs, and a user's
memory is opened once even when their first calls arrive together.

Everything but the opening and closing (worker threads) runs on the event loop, so the
table of loaded users needs no lock.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError

from smriti.auth.verifier import PRINCIPAL_CLAIM, ScopeNames
from smriti.config import canonical_user
from smriti.logs import get_logger

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from smriti.config import Settings
    from smriti.owner.service import Service

log = get_logger(__name__)

#: How long opening a user's memory waits for the store's owner before the call goes on
#: (it then waits for the store inside the owner connection), as for a single server.
ATTACH_WAIT_SECONDS = 1.0
#: Memories opened at once. Opening runs a backend's schema checks (on a shared Neo4j
#: database, 20 at once wait on each other's schema locks: 21 s for 20 users, against
#: a fraction of that a few at a time) or starts an owner process (CPU-bound); calls of
#: users already open go on meanwhile.
OPEN_SLOTS = 4


class Memories(Protocol):
    """What the tools ask for the memory of a call."""

    settings: Settings | None

    def use(self, ctx: Context | None, need: str) -> Any:
        """An async context manager giving the Service for this call; ``need`` is
        ``read`` or ``write``. Raises ToolError when the caller may not."""
        ...


class SingleMemory:
    """Every call uses one memory (stdio, or HTTP without authentication)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.settings: Settings | None = getattr(service, "settings", None)

    @asynccontextmanager
    async def use(self, ctx: Context | None, need: str) -> AsyncIterator[Service]:
        """The one memory."""
        yield self.service


def caller_token(ctx: Context | None) -> AccessToken | None:
    """The verified token of the HTTP request that carried this call, if any.

    The request object the transport attached to the message is read first: a
    streamable HTTP session serves every request of its client, and the token of each
    request is the one that counts. The SDK's context variable is the fallback.
    """
    request = None
    if ctx is not None:
        try:
            request = ctx.request_context.request
        except ValueError:  # not in a request
            request = None
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        return user.access_token
    return get_access_token()


def caller_principal(ctx: Context | None) -> str | None:
    """The namespaced principal of this call's verified caller (``key:<id>`` or
    ``oauth:<issuer>#<subject>``, see ``smriti.auth.principals``), or None when the
    call has none (stdio, HTTP without authentication)."""
    return principal_of(caller_token(ctx))


def principal_of(token: AccessToken | None) -> str | None:
    """The namespaced principal a verified token carries, or None."""
    if token is None or not token.claims:
        return None
    value = token.claims.get(PRINCIPAL_CLAIM)
    return value if isinstance(value, str) and value else None


class _Loaded:
    """One user's memory, open or being opened."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.service: Service | None = None
        self.error: BaseException | None = None
        self.ready = anyio.Event()
        self.calls = 0


class UserMemories:
    """The memories of the callers of an authenticated HTTP server."""

    def __init__(
        self,
        settings: Settings,
        scopes: ScopeNames,
        *,
        kind: str = "http server",
        limit: int | None = None,
        opener: Callable[..., Service] | None = None,
    ) -> None:
        self.settings: Settings | None = settings
        self.base = settings
        self.scopes = scopes
        self.kind = kind
        self.limit = max(1, limit if limit is not None else settings.max_loaded_users)
        if opener is None:
            from smriti.owner.service import open_service

            opener = open_service
        self._open = opener
        self._loaded: OrderedDict[str, _Loaded] = OrderedDict()
        self._closing: dict[str, threading.Event] = {}
        self._closers: list[threading.Thread] = []
        self._slots: anyio.Semaphore | None = None

    @asynccontextmanager
    async def use(self, ctx: Context | None, need: str) -> AsyncIterator[Service]:
        """The caller's memory for the duration of one call; ToolError when the call has
        no verified caller or its token lacks the scope ``need`` asks for."""
        async with self.use_token(caller_token(ctx), need) as service:
            yield service

    @asynccontextmanager
    async def use_token(self, token: AccessToken | None, need: str) -> AsyncIterator[Service]:
        """The memory of the verified ``token``'s user, as ``use`` gives a tool call's
        (the web page's sessions carry the token their sign-in verified)."""
        if token is None or not token.subject:
            raise ToolError("this server needs an authenticated caller (Authorization: Bearer)")
        wanted = self.scopes.of(need)
        if wanted not in token.scopes:
            raise ToolError(
                f"insufficient_scope: this call needs the {wanted!r} scope, and the token "
                f"grants {' '.join(token.scopes) or 'none'}"
            )
        # One person, one store: every spelling of a name is the canonical one.
        entry = await self._acquire(canonical_user(token.subject))
        try:
            assert entry.service is not None
            yield entry.service
        finally:
            entry.calls -= 1
            self._evict_over_limit()

    def loaded(self) -> list[str]:
        """The users whose memory is open, least recently used first."""
        return [u for u, e in self._loaded.items() if e.service is not None]

    async def _acquire(self, user: str) -> _Loaded:
        while True:
            entry = self._loaded.get(user)
            if entry is not None:
                entry.calls += 1
                self._loaded.move_to_end(user)
                await entry.ready.wait()
                if entry.service is not None:
                    return entry
                entry.calls -= 1
                raise ToolError(f"the memory of {user!r} could not be opened: {entry.error}")
            closing = self._closing.get(user)
            if closing is None or closing.is_set():
                self._closing.pop(user, None)
                return await self._open_entry(user)
            await anyio.to_thread.run_sync(closing.wait)  # its previous close first

    async def _open_entry(self, user: str) -> _Loaded:
        from smriti.mcp_server.tools import run_engine

        entry = self._loaded[user] = _Loaded(user)
        entry.calls += 1
        settings = dataclasses.replace(self.base, accessing_user=user)
        if self._slots is None:
            self._slots = anyio.Semaphore(OPEN_SLOTS)
        try:
            async with self._slots:
                entry.service = await run_engine(
                    self._open,
                    settings,
                    self.kind,
                    background=True,
                    attach_wait=ATTACH_WAIT_SECONDS,
                )
        except BaseException as exc:
            entry.error = exc
            entry.calls -= 1
            if self._loaded.get(user) is entry:
                del self._loaded[user]
            raise
        finally:
            entry.ready.set()
        log.info("user memory opened", user=user, loaded=len(self._loaded), limit=self.limit)
        self._evict_over_limit()
        return entry

    def _evict_over_limit(self) -> None:
        """Close least recently used memories with no call under way, down to the limit."""
        excess = len(self._loaded) - self.limit
        for user, entry in list(self._loaded.items()):
            if excess <= 0:
                return
            if entry.calls == 0 and entry.service is not None:
                del self._loaded[user]
                self._close_later(user, entry.service)
                excess -= 1

    def _close_later(self, user: str, service: Service) -> None:
        done = threading.Event()
        self._closing[user] = done

        def close() -> None:
            try:
                service.close()
            except Exception:
                log.exception("closing a user's memory failed", user=user)
            finally:
                done.set()

        thread = threading.Thread(target=close, name=f"smriti-close-{user}", daemon=False)
        self._closers = [t for t in self._closers if t.is_alive()]
        self._closers.append(thread)
        thread.start()
        log.info("user memory evicted", user=user, loaded=len(self._loaded), limit=self.limit)

    def close(self) -> None:
        """Close every open memory (at shutdown, once the event loop has stopped)."""
        for user, entry in list(self._loaded.items()):
            if entry.service is not None:
                try:
                    entry.service.close()
                except Exception:
                    log.exception("closing a user's memory failed", user=user)
        self._loaded.clear()
        for thread in self._closers:
            thread.join()
