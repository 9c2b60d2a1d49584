"""Who is looking at the page: browser sessions behind an HttpOnly cookie.

A session is created only by proving who one is: the one-time token ``smriti ui``
prints (the local page), or an API key or OAuth access token typed into the sign-in
form (a team server). Its id lives only in the cookie (HttpOnly, SameSite=Strict,
Secure off loopback) and in this process's memory, so a restart signs everyone out.
Each session has its own CSRF token, which every form posts back.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

#: The cookie that carries the session id.
COOKIE = "smriti_ui"
#: A session unused for this long is gone (seconds).
IDLE_SECONDS = 2 * 3600
#: A session ends this long after its sign-in, however busy (seconds).
MAX_AGE_SECONDS = 12 * 3600
#: Sessions kept at once; the least recently used goes first.
MAX_SESSIONS = 1000


@dataclass(slots=True)
class Session:
    """One signed-in browser."""

    id: str
    #: The user whose memory the page shows.
    user: str
    #: The verified bearer token of a team server's session (None: the local page).
    token: Any = None
    #: The address the session signed in from (for the audit log).
    client: str = ""
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    created: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)

    def csrf_ok(self, sent: str | None) -> bool:
        """Whether ``sent`` is this session's CSRF token (compared in constant time)."""
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), str(sent).encode())


class SessionStore:
    """The sessions of one page server, and the one-time tokens that open them."""

    def __init__(
        self,
        idle: float = IDLE_SECONDS,
        max_age: float = MAX_AGE_SECONDS,
        limit: int = MAX_SESSIONS,
    ) -> None:
        self.idle = idle
        self.max_age = max_age
        self.limit = limit
        self._sessions: dict[str, Session] = {}
        self._once: dict[str, str] = {}
        self._lock = threading.Lock()

    def one_time_token(self, user: str) -> str:
        """A token that opens a session for ``user`` once (``smriti ui`` prints it)."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._once[token] = user
        return token

    def redeem(self, token: str) -> Session | None:
        """The new session a one-time token opens; None for an unknown or used token."""
        with self._lock:
            for known in list(self._once):
                if hmac.compare_digest(known.encode(), token.encode()):
                    user = self._once.pop(known)
                    break
            else:
                return None
        return self.open(user)

    def open(self, user: str, token: Any = None, client: str = "") -> Session:
        """A new session for ``user`` (with the verified bearer ``token`` of a team
        server, signed in from ``client``)."""
        session = Session(secrets.token_urlsafe(32), user, token, client)
        with self._lock:
            self._sessions[session.id] = session
            while len(self._sessions) > self.limit:
                oldest = min(self._sessions.values(), key=lambda s: s.seen)
                del self._sessions[oldest.id]
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id, or None (unknown, idle too long, too old)."""
        if not session_id:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > self.idle or now - session.created > self.max_age:
                del self._sessions[session_id]
                return None
            session.seen = now
            return session

    def close(self, session_id: str) -> None:
        """Sign a session out."""
        with self._lock:
            self._sessions.pop(session_id, None)
