"""The team server's limits against the real ``smriti serve --transport http``: sessions
per principal (one key flooding, another user working), the tool-call rate limit,
and slow or surplus connections, driven by the MCP SDK client and raw HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest

from smriti.testing.http_users import HttpServer, client, make_keys, user_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def headers(token: str, session: str | None = None) -> dict[str, str]:
    sent = {"Accept": ACCEPT, "Content-Type": "application/json"}
    sent["Authorization"] = f"Bearer {token}"
    if session is not None:
        sent["Mcp-Session-Id"] = session
        sent["Mcp-Protocol-Version"] = "2025-06-18"
    return sent


def open_session(url: str, token: str) -> httpx2.Response:
    """A raw ``initialize`` that opens a session (and leaves it idle)."""
    return httpx2.post(url, json=INITIALIZE, headers=headers(token), timeout=30)


def list_tools(url: str, token: str, session: str) -> int:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    return httpx2.post(url, json=body, headers=headers(token, session), timeout=30).status_code


def tool_call(name: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class Stream:
    """A session's GET stream held open over a raw socket: the session is busy."""

    def __init__(self, port: int, token: str, session: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        request = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {token}\r\nMcp-Session-Id: {session}\r\n"
            "Mcp-Protocol-Version: 2025-06-18\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.status = self.sock.recv(4096).split(b"\r\n", 1)[0]

    def close(self) -> None:
        self.sock.close()


# --- sessions per principal ------------------------------------------------------------


@pytest.fixture(scope="module")
def session_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, dict]]:
    root = tmp_path_factory.mktemp("sessions")
    env = user_env(
        os.environ,
        root / "store",
        HOME=str(root),
        SMRITI_AUTH="keys",
        SMRITI_OWNER="off",
        SMRITI_KEY_SESSIONS="3",
        SMRITI_USER_SESSIONS="5",
    )
    tokens = make_keys(root / "store" / ".api-keys.json", ["alice", "bob"])
    tokens["alice2"] = make_keys(root / "store" / ".api-keys.json", ["alice"])["alice"]
    server = HttpServer(env, root / "server.log").start()
    try:
        yield server, tokens
    finally:
        assert server.stop() == 0, server.text()


@pytest.mark.anyio
async def test_one_key_flooding_sessions_leaves_another_user_working(
    session_server: tuple[HttpServer, dict],
) -> None:
    """alice's key opens 40 sessions (cap 3) while bob works through the SDK client:
    each of alice's new sessions closes her oldest idle one, and every call of bob's
    succeeds."""
    server, tokens = session_server
    opened: list[tuple[int, str]] = []
    bob_calls: list[bool] = []

    async def flood() -> None:
        for _ in range(40):
            answer = await anyio.to_thread.run_sync(open_session, server.url, tokens["alice"])
            opened.append((answer.status_code, answer.headers.get("mcp-session-id", "")))

    async def work() -> None:
        async with client(server.url, tokens["bob"]) as bob:
            for i in range(15):
                done = await bob.call_tool("smriti_store", {"content": f"bob waters plant {i}"})
                found = await bob.call_tool("smriti_recall", {"query": "plant"})
                bob_calls.extend([not done.is_error, not found.is_error])

    async with anyio.create_task_group() as tg:
        tg.start_soon(flood)
        tg.start_soon(work)
    assert bob_calls == [True] * 30
    assert [status for status, _ in opened] == [200] * 40, opened
    sessions = [sid for _, sid in opened]
    assert len(set(sessions)) == 40
    # the oldest were closed to make room; the newest three are alive
    assert [list_tools(server.url, tokens["alice"], s) for s in sessions[:5]] == [404] * 5
    assert [list_tools(server.url, tokens["alice"], s) for s in sessions[-3:]] == [200] * 3
    assert server.text().count("idle session closed to make room") >= 37


def test_busy_sessions_are_not_evicted_and_a_new_one_is_429(
    session_server: tuple[HttpServer, dict],
) -> None:
    """With every session of a key busy (an open stream), a new one is refused with
    429 and Retry-After; the user's other key still opens sessions up to the user cap,
    and once the streams close, room is made again."""
    server, tokens = session_server
    sessions = [open_session(server.url, tokens["alice"]) for _ in range(3)]
    streams = [Stream(server.port, tokens["alice"], s.headers["mcp-session-id"]) for s in sessions]
    try:
        assert [s.status for s in streams] == [b"HTTP/1.1 200 OK"] * 3
        refused = open_session(server.url, tokens["alice"])
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) > 0
        assert "too many open sessions" in refused.json()["error"]["message"]
        # the other key of the same user: 2 more fit under the user cap of 5
        other = [open_session(server.url, tokens["alice2"]).status_code for _ in range(2)]
        assert other == [200, 200]
        assert open_session(server.url, tokens["bob"]).status_code == 200
    finally:
        for stream in streams:
            stream.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the server notices the closed streams
        answer = open_session(server.url, tokens["alice"])
        if answer.status_code == 200:
            break
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text


# --- the tool-call rate, slow and surplus connections ------------------------------------


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, dict]]:
    root = tmp_path_factory.mktemp("tight")
    env = user_env(
        os.environ,
        root / "store",
        HOME=str(root),
        SMRITI_AUTH="keys",
        SMRITI_OWNER="off",
        SMRITI_RATE_LIMIT="6",  # per minute: one every 10 s after the burst
        SMRITI_RATE_BURST="3",
        SMRITI_HTTP_HEADER_TIMEOUT="1",
        SMRITI_HTTP_BODY_TIMEOUT="1",
        SMRITI_HTTP_KEEPALIVE="1",
        SMRITI_HTTP_MAX_CONNECTIONS="6",
        SMRITI_SESSION_IDLE="2",
    )
    tokens = make_keys(root / "store" / ".api-keys.json", ["carol", "dave"])
    server = HttpServer(env, root / "server.log").start()
    try:
        yield server, tokens
    finally:
        assert server.stop() == 0, server.text()


def test_tool_calls_past_the_rate_are_429_for_that_user_only(
    tight_server: tuple[HttpServer, dict],
) -> None:
    server, tokens = tight_server
    sid = open_session(server.url, tokens["carol"]).headers["mcp-session-id"]
    call = tool_call("smriti_manage", {"action": "stats"})
    sent = headers(tokens["carol"], sid)
    answers = [httpx2.post(server.url, json=call, headers=sent, timeout=30) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert int(answers[3].headers["retry-after"]) >= 1
    assert answers[3].json()["id"] == 7  # the refused request's id, for the client
    other = open_session(server.url, tokens["dave"]).headers["mcp-session-id"]
    again = httpx2.post(server.url, json=call, headers=headers(tokens["dave"], other), timeout=30)
    assert again.status_code == 200


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within ``seconds``, and what it sent."""
    sock.settimeout(0.2)
    received = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True, received
        if not chunk:
            return True, received
        received += chunk
    return False, received


def test_an_idle_connection_is_dropped(tight_server: tuple[HttpServer, dict]) -> None:
    server, _ = tight_server
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        closed, sent = _closed_within(sock, 6)
    assert closed
    assert sent == b"" or sent.startswith(b"HTTP/1.1 408"), sent


def test_trickled_headers_are_dropped(tight_server: tuple[HttpServer, dict]) -> None:
    server, tokens = tight_server
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\n")
        started = time.monotonic()
        closed = False
        for i in range(40):  # a header line every 0.25 s, for up to 10 s
            try:
                sock.sendall(f"X-Slow-{i}: a\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            done, sent = _closed_within(sock, 0.25)
            if done:
                closed = True
                break
        assert closed, "a client trickling headers was kept"
        assert time.monotonic() - started < 8


def test_a_trickled_authenticated_body_is_dropped(tight_server: tuple[HttpServer, dict]) -> None:
    server, tokens = tight_server
    body = json.dumps(INITIALIZE).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {tokens['carol']}\r\nAccept: {ACCEPT}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head.encode())
        received = b""
        for byte in body[:30]:  # one byte every 0.25 s: the whole would take 30 s
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            done, sent = _closed_within(sock, 0.25)
            received += sent
            if done:
                break
        else:
            pytest.fail("a client trickling its body was kept")
    assert received.startswith(b"HTTP/1.1 408"), received


def test_an_idle_keep_alive_connection_is_dropped(tight_server: tuple[HttpServer, dict]) -> None:
    server, _ = tight_server
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
        closed, sent = _closed_within(sock, 6)
    assert sent.startswith(b"HTTP/1.1 401")  # answered, then closed when idle
    assert closed


def test_connections_past_the_limit_are_refused(tight_server: tuple[HttpServer, dict]) -> None:
    server, tokens = tight_server
    held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(6)]
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as extra:
            closed, sent = _closed_within(extra, 3)
        assert closed and sent.startswith(b"HTTP/1.1 503"), sent
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)  # the server sees them go
    sid = open_session(server.url, tokens["dave"])
    assert sid.status_code == 200


def test_an_idle_session_is_closed(tight_server: tuple[HttpServer, dict]) -> None:
    """SMRITI_SESSION_IDLE=2: a session with nothing in flight for longer is gone."""
    server, tokens = tight_server
    sid = open_session(server.url, tokens["dave"]).headers["mcp-session-id"]
    assert list_tools(server.url, tokens["dave"], sid) == 200
    time.sleep(4)
    assert list_tools(server.url, tokens["dave"], sid) == 404
