"""The real ``smriti`` console entry point as a stdio MCP subprocess.

The server runs as MCP clients start it (``python -m smriti``, installed entry points, no
API keys), with STORAGE_LOCATION in a temporary directory. Stdout must carry only
protocol; shutdown on stdin EOF or SIGTERM must exit 0 after closing the store (SPEC §9
item 16: the reference crashed with exit code 2).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sh")

HANDSHAKE_VERSION = "2025-06-18"
SECRET_VARS = ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_env(tmp_path: Path) -> dict[str, str]:
    """The environment an MCP client would give the server: no API keys."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update(
        STORAGE_LOCATION=str(tmp_path / "store"),
        ACCESSING_USER="stdio-user",
        HOME=str(tmp_path / "home"),
        LOG_LEVEL="info",
        PYTHONUNBUFFERED="1",
        # the Hub is out of reach here: say so, rather than let each start find out
        HF_HUB_OFFLINE="1",
    )
    return env


def rpc(message_id: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = params
    return (json.dumps(message) + "\n").encode()


INITIALIZE = rpc(
    1,
    "initialize",
    {
        "protocolVersion": HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
)
INITIALIZED = rpc(None, "notifications/initialized")


def start(tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "smriti"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(tmp_path),
    )


def protocol_lines(stdout: bytes) -> list[dict[str, Any]]:
    """Every stdout line parsed as JSON-RPC; anything else fails the test."""
    lines = [line for line in stdout.decode().split("\n") if line]
    messages = [json.loads(line) for line in lines]
    assert all(m.get("jsonrpc") == "2.0" for m in messages), lines
    return messages


@pytest.mark.anyio
async def test_sdk_client_over_stdio_then_eof_exits_zero(tmp_path: Path) -> None:
    rc_file, err_file = tmp_path / "rc", tmp_path / "stderr.log"
    # sh records the server's exit code after the client closes its stdin.
    script = f"{shlex.quote(sys.executable)} -m smriti; echo $? > {shlex.quote(str(rc_file))}"
    params = StdioServerParameters(command="/bin/sh", args=["-c", script], env=server_env(tmp_path))
    with err_file.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert client.server_info.name == "smriti"
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"smriti_store", "smriti_recall", "smriti_manage"}
            stored = await client.call_tool(
                "smriti_store", {"content": "The stdio test likes blue whales", "tags": "ocean"}
            )
            assert not stored.is_error, stored
            recalled = await client.call_tool("smriti_recall", {"query": "blue whales"})
            assert not recalled.is_error, recalled
            ids = [r["id"] for r in recalled.structured_content["results"]]
            assert stored.structured_content["id"] in ids
            bad = await client.call_tool("smriti_store", {"content": "x", "importance": "abc"})
            assert bad.is_error
    for _ in range(50):  # the client waits for the process; sh writes the file just before
        if rc_file.exists() and rc_file.read_text().strip():
            break
        time.sleep(0.1)
    assert rc_file.read_text().strip() == "0", err_file.read_text()
    stderr = err_file.read_text()
    assert "serving" in stderr and "stopped" in stderr
    assert "Traceback" not in stderr


def test_stdout_is_only_protocol_and_eof_exits_zero(tmp_path: Path) -> None:
    proc = start(tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    store_call = rpc(
        2, "tools/call", {"name": "smriti_store", "arguments": {"content": "raw protocol memory"}}
    )
    seen: list[bytes] = []
    # Like a real client: wait for each answer, then close stdin to shut the server down.
    for message in (INITIALIZE, INITIALIZED + store_call, rpc(3, "tools/list")):
        proc.stdin.write(message)
        proc.stdin.flush()
        seen.append(proc.stdout.readline())
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr.decode()
    messages = protocol_lines(b"".join(seen) + stdout)
    by_id = {m.get("id"): m for m in messages}
    assert by_id[1]["result"]["serverInfo"]["name"] == "smriti"
    assert by_id[2]["result"]["isError"] is False
    assert by_id[2]["result"]["structuredContent"]["summary"]
    assert len(by_id[3]["result"]["tools"]) == 3
    text = stderr.decode()
    assert "serving" in text and "stdin closed" in text and "Traceback" not in text


def test_immediate_eof_exits_zero(tmp_path: Path) -> None:
    proc = start(tmp_path)
    stdout, stderr = proc.communicate(b"", timeout=60)
    assert proc.returncode == 0, stderr.decode()
    assert stdout == b""


def test_sigterm_while_idle_exits_zero_and_keeps_data(tmp_path: Path) -> None:
    proc = start(tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    store_call = rpc(
        2, "tools/call", {"name": "smriti_store", "arguments": {"content": "kept after SIGTERM"}}
    )
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    proc.stdin.write(INITIALIZED + store_call)
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 2
    proc.send_signal(signal.SIGTERM)  # stdin stays open: the server is idle, waiting for input
    try:
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr.decode()
    protocol_lines(stdout)
    assert "SIGTERM" in stderr.decode() and "stopped" in stderr.decode()

    again = subprocess.run(
        [sys.executable, "-m", "smriti", "recall", "--json", "--mode", "list"],
        env=server_env(tmp_path),
        capture_output=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr.decode()
    contents = [r["content"] for r in json.loads(again.stdout)["results"]]
    assert contents == ["kept after SIGTERM"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.anyio
async def test_streamable_http_then_sigterm_exits_zero(tmp_path: Path) -> None:
    port = free_port()
    err_file = tmp_path / "stderr.log"
    with err_file.open("wb") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", "smriti", "serve", "--transport", "http", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=server_env(tmp_path),
        )
        try:
            for _ in range(600):  # wait for the listening socket
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert proc.poll() is None, err_file.read_text()
                await anyio.sleep(0.1)
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                stored = await client.call_tool("smriti_store", {"content": "over streamable HTTP"})
                assert not stored.is_error, stored
                recalled = await client.call_tool("smriti_recall", {"query": "streamable HTTP"})
                assert recalled.structured_content["count"] == 1
            proc.send_signal(signal.SIGTERM)
            stdout, _ = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, err_file.read_text()
    assert stdout == b""  # HTTP mode too keeps stdout clean; logs go to stderr
    assert "stopped" in err_file.read_text()


def test_burst_then_eof_answers_every_request(tmp_path: Path) -> None:
    """Requests written together with EOF are all answered (their stores were applied)."""
    script = Path(sys.executable).with_name("smriti")  # the installed console script
    count = 8
    stores = b"".join(
        rpc(10 + i, "tools/call", {"name": "smriti_store", "arguments": {"content": f"burst {i}"}})
        for i in range(count)
    )
    # The built-in lexical embedder: the replies must not wait on a model download.
    env = {**server_env(tmp_path), "SMRITI_EMBEDDER": "lexical"}
    started = time.monotonic()
    done = subprocess.run(
        [str(script)],
        input=INITIALIZE + INITIALIZED + stores + rpc(99, "tools/list"),
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    by_id = {m.get("id"): m for m in protocol_lines(done.stdout)}
    assert sorted(i for i in by_id if i is not None) == [1, *range(10, 10 + count), 99]
    assert all(by_id[10 + i]["result"]["isError"] is False for i in range(count))
    assert "gave up waiting" not in done.stderr.decode()
    assert time.monotonic() - started < 60
    listed = subprocess.run(
        [str(script), "recall", "--json", "--mode", "list", "--limit", "20"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert json.loads(listed.stdout)["count"] == count
