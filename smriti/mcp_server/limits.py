"""Fair limits per principal on the team server: open sessions and tool-call rate.

The MCP SDK's session manager caps the sessions of the whole server (10,000) and closes
a session after 30 idle minutes; one key could open them all and lock every other user
out. ``SessionLimits`` keeps its own record of the streamable HTTP sessions each user
and each credential (API key, OAuth subject) opened, learned from the responses that
open them (their ``Mcp-Session-Id``) and from the requests that use them. A request
that would open one more session than a user (``SMRITI_USER_SESSIONS``) or a
credential (``SMRITI_KEY_SESSIONS``) may hold first closes that principal's oldest idle
session (no request in flight, no open stream), the way its client would (an HTTP
``DELETE`` with the session's own credential, through the SDK's app); when every one of
them is busy it is refused with ``429`` and ``Retry-After``. Other users are never
touched. Idle sessions are closed after ``SMRITI_SESSION_IDLE`` seconds (the SDK's own
idle timeout is set to the same).

``RateLimiter`` is a token bucket per user for tool calls (``SMRITI_RATE_LIMIT`` per
minute, ``SMRITI_RATE_BURST`` at once); off on a loopback bind unless set.

Everything here runs on the event loop, so it needs no lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smriti.config import Settings

#: ``Retry-After`` when every session of a principal is busy: a busy session ends when
#: its client closes its stream or finishes its call, which no clock predicts.
BUSY_RETRY_SECONDS = 30


@dataclass(eq=False)
class Session:
    """One open streamable HTTP session, as the limits see it."""

    id: str
    user: str
    credential: str
    #: The verified caller that opened it (``scope["user"]``): closing it needs the same.
    owner: Any
    opened: float
    last: float
    busy: int = 0


@dataclass
class Admission:
    """What ``SessionLimits.admit`` decided: close ``evict`` first, then go on; or refuse
    with ``retry_after`` seconds and ``reason``."""

    evict: list[Session] = field(default_factory=list)
    retry_after: int = 0
    reason: str = ""

    @property
    def refused(self) -> bool:
        """Whether the new session is refused."""
        return self.retry_after > 0


class SessionLimits:
    """Open sessions per user and per credential (see the module doc)."""

    def __init__(
        self,
        per_user: int,
        per_credential: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_user = per_user
        self.per_credential = per_credential
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.sessions: dict[str, Session] = {}
        #: Sessions being opened (their first request is under way), by principal.
        self.opening: dict[str, int] = {}

    def admit(self, user: str, credential: str) -> Admission:
        """Whether ``user`` with ``credential`` may open one more session, and which of
        their idle sessions to close first. On admission a slot is held until
        ``opened`` or ``abandoned`` is called."""
        self._expire()
        decision = Admission()
        # the credential first: what it gives up counts for its user too
        for name, cap, of in (
            (f"credential {credential}", self.per_credential, lambda s: s.credential == credential),
            (f"user {user}", self.per_user, lambda s: s.user == user),
        ):
            held = [s for s in self.sessions.values() if of(s) and s not in decision.evict]
            pending = self.opening.get(name, 0)
            excess = len(held) + pending + 1 - cap
            idle = sorted((s for s in held if s.busy == 0), key=lambda s: s.last)
            if excess > len(idle):
                return Admission(
                    retry_after=BUSY_RETRY_SECONDS,
                    reason=f"{name} has {len(held) + pending} open sessions (at most {cap}), "
                    "none idle",
                )
            decision.evict += idle[: max(0, excess)]
        for session in decision.evict:
            self.sessions.pop(session.id, None)
        self._hold(user, credential, +1)
        return decision

    def opened(self, session_id: str, user: str, credential: str, owner: Any) -> None:
        """The session a request admitted by ``admit`` opened."""
        self._hold(user, credential, -1)
        now = self.clock()
        self.sessions[session_id] = Session(session_id, user, credential, owner, now, now)

    def abandoned(self, user: str, credential: str) -> None:
        """The request admitted by ``admit`` opened no session."""
        self._hold(user, credential, -1)

    def begin(self, session_id: str) -> Session | None:
        """A request of a known session starts (it is busy until ``end``)."""
        session = self.sessions.get(session_id)
        if session is not None:
            session.busy += 1
            session.last = self.clock()
        return session

    def end(self, session: Session, gone: bool) -> None:
        """That request ended; ``gone`` when the session no longer exists (deleted or
        answered 404)."""
        session.busy -= 1
        session.last = self.clock()
        if gone:
            self.sessions.pop(session.id, None)

    def count(self, user: str) -> int:
        """Sessions ``user`` holds now."""
        self._expire()
        return sum(1 for s in self.sessions.values() if s.user == user)

    def _hold(self, user: str, credential: str, step: int) -> None:
        for name in (f"user {user}", f"credential {credential}"):
            self.opening[name] = self.opening.get(name, 0) + step
            if self.opening[name] <= 0:
                del self.opening[name]

    def _expire(self) -> None:
        """Forget sessions idle for longer than the idle timeout: the SDK closes them."""
        cutoff = self.clock() - self.idle_seconds
        for sid in [s.id for s in self.sessions.values() if s.busy == 0 and s.last < cutoff]:
            del self.sessions[sid]


class RateLimiter:
    """A token bucket per key: ``per_minute`` tool calls on average, ``burst`` at once."""

    def __init__(
        self, per_minute: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, calls: int) -> int:
        """Take ``calls`` tokens for ``key``: 0 when allowed, else the whole seconds to
        wait before that many are there (nothing is taken then). A batch larger than
        the burst goes through on a full bucket and leaves it in debt."""
        now = self.clock()
        tokens, then = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        needed = min(float(calls), self.burst)
        if needed <= tokens:
            self.buckets[key] = (tokens - calls, now)
            return 0
        self.buckets[key] = (tokens, now)
        return max(1, math.ceil((needed - tokens) / self.rate))


#: ``SMRITI_RATE_LIMIT=auto`` on a non-loopback bind: ten calls a second on average,
#: far above what an agent in a conversation makes, enough for an import script.
AUTO_RATE_PER_MINUTE = 600.0


@dataclass(frozen=True)
class HttpLimits:
    """The HTTP server's limits, from the settings (see docs/team.md)."""

    user_sessions: int = 100
    key_sessions: int = 50
    session_idle: float = 600.0
    #: Tool calls per minute per user, or None for no rate limit.
    rate_per_minute: float | None = None
    rate_burst: int = 60
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive: float = 65.0
    max_connections: int = 1000

    @classmethod
    def from_settings(cls, settings: Settings, loopback: bool) -> HttpLimits:
        """The limits ``settings`` ask for on a loopback (or other) bind."""
        rate = settings.rate_limit
        off = rate == "off" or (rate == "auto" and loopback)
        return cls(
            user_sessions=settings.user_sessions,
            key_sessions=settings.key_sessions,
            session_idle=settings.session_idle,
            rate_per_minute=None
            if off
            else AUTO_RATE_PER_MINUTE
            if rate == "auto"
            else float(rate),
            rate_burst=settings.rate_burst,
            header_timeout=settings.http_header_timeout,
            body_timeout=settings.http_body_timeout,
            keepalive=settings.http_keepalive,
            max_connections=settings.http_max_connections,
        )

    def rate_limiter(self) -> RateLimiter | None:
        """A fresh limiter for these limits, or None when tool calls are not limited."""
        if self.rate_per_minute is None:
            return None
        return RateLimiter(self.rate_per_minute, self.rate_burst)

    def session_limits(self) -> SessionLimits:
        """A fresh record of sessions for these limits."""
        return SessionLimits(self.user_sessions, self.key_sessions, self.session_idle)
