"""Connecting to FalkorDB: address parsing, graph names, retries and error translation.

The ``falkordb`` client (and redis-py under it) is imported lazily so that loading the
plugin costs nothing until a FalkorDB backend is actually opened.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from smriti import ConfigError, get_logger
from smriti.backend import BackendError

log = get_logger(__name__)

#: Attempts (after the first) redis-py makes when a connection drops or is refused.
CONNECT_RETRIES = 6
#: Seconds to wait for a TCP connection to the server.
CONNECT_TIMEOUT = 5.0
#: Seconds to wait for one query's reply (index builds run in the background).
SOCKET_TIMEOUT = 120.0

_SAFE_CHAR = re.compile(r"[A-Za-z0-9-]")
_AUTH_MARKERS = ("WRONGPASS", "NOAUTH", "invalid password", "invalid username-password")


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``host:port`` (``FALKOR_ADDR``) into its parts, or raise ConfigError."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"FALKOR_ADDR={addr!r} is not host:port (e.g. localhost:6379)")
    return host.strip("[]"), int(port)


def safe_graph_component(user: str) -> str:
    """An injective, key-safe spelling of ``user`` for a graph name.

    Letters, digits and ``-`` are kept; ``_`` becomes ``__`` and every other byte
    ``_xx`` (hex), so two different users can never share a graph.
    """
    if not user:
        raise ConfigError("FalkorDB graph isolation needs a non-empty user name")
    out: list[str] = []
    for ch in user:
        if _SAFE_CHAR.fullmatch(ch):
            out.append(ch)
        elif ch == "_":
            out.append("__")
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    return "".join(out)


def graph_name_for(user: str, isolation: str, shared_graph: str) -> str:
    """The graph a user's memories live in: shared (tenant) or ``{user}_smriti``."""
    if isolation == "graph":
        return f"{safe_graph_component(user)}_smriti"
    if isolation != "tenant":
        raise ConfigError(f"FALKOR_ISOLATION={isolation!r} is invalid (allowed: tenant, graph)")
    if not shared_graph.strip():
        raise ConfigError("FALKOR_GRAPH must not be empty")
    return shared_graph.strip()


def connect(addr: str, password: str, unix_socket: str | None = None) -> Any:
    """A ``falkordb.FalkorDB`` client for ``addr`` that reconnects after dropped connections.

    Pings once, so an unreachable server or a rejected password fails here with a
    BackendError naming the address. ``unix_socket`` connects through that socket
    instead (the embedded server); ``addr`` then only names it in messages.
    """
    from falkordb import FalkorDB
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.retry import Retry

    endpoint: dict[str, Any] = (
        {"unix_socket_path": unix_socket}
        if unix_socket
        else dict(zip(("host", "port"), parse_addr(addr), strict=True))
    )
    probe(addr, password, endpoint)
    client = call(
        addr,
        lambda: FalkorDB(
            **endpoint,
            password=password or None,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=SOCKET_TIMEOUT,
            socket_keepalive=True,
            retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), CONNECT_RETRIES),
            retry_on_error=[RedisConnectionError],
            health_check_interval=30,
        ),
    )
    try:
        call(addr, client.connection.ping)
        call(addr, lambda: client.connection.execute_command("GRAPH.LIST"))
    except BackendError:
        close_quietly(client)
        raise
    return client


def probe(addr: str, password: str, endpoint: dict[str, Any]) -> None:
    """One connection attempt without retries, so a wrong address or password fails fast.

    (redis-py treats authentication errors as connection errors and would retry them.)
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    conn = redis.Redis(
        **endpoint,
        password=password or None,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=CONNECT_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        call(addr, conn.ping)
    finally:
        conn.close()


def close_quietly(client: Any) -> None:
    """Close a client's connection pool, ignoring errors (the server may be gone)."""
    try:
        client.close()
    except Exception as exc:  # closing must never mask the error being reported
        log.debug("falkordb_close_failed", error=str(exc))


def call[T](addr: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` and translate redis / FalkorDB errors into BackendError."""
    from redis.exceptions import AuthenticationError, ResponseError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    try:
        return fn()
    except AuthenticationError as exc:
        raise _auth_error(addr, exc) from exc
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise BackendError(
            f"cannot reach FalkorDB at {addr} ({exc}); start the server or fix FALKOR_ADDR"
        ) from exc
    except ResponseError as exc:
        text = str(exc)
        if any(marker.lower() in text.lower() for marker in _AUTH_MARKERS):
            raise _auth_error(addr, exc) from exc
        if "unknown command" in text.lower() and "graph." in text.lower():
            raise BackendError(
                f"the server at {addr} is Redis without the FalkorDB module; "
                "point FALKOR_ADDR at a FalkorDB server"
            ) from exc
        raise BackendError(f"FalkorDB query failed at {addr}: {text}") from exc


def _auth_error(addr: str, exc: Exception) -> BackendError:
    return BackendError(
        f"FalkorDB at {addr} rejected the credentials ({exc}); check FALKOR_PASSWORD"
    )
