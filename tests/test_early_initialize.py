"""``initialize`` answered before the MCP SDK is imported (smriti.mcp_server.early): the
answer must be the SDK's own, and the SDK must then serve the session as if it had read
the request itself, answering it only once."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.runner import ServerRunner, _dump_result
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from smriti import __version__
from smriti.mcp_server import build_server
from smriti.mcp_server.early import HANDSHAKE_VERSIONS, EarlyInitialize
from smriti.mcp_server.early import initialize_result as early_result
from smriti.mcp_server.texts import SERVER_INSTRUCTIONS
from smriti.testing.owner_load import load_env, smriti_command


def _params(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }


def _sdk_answer(engine: Any, params: dict[str, Any]) -> dict[str, Any]:
    """What the SDK answers to ``initialize`` with ``params``, through its own code."""
    lowlevel = build_server(engine)._lowlevel_server
    runner = SimpleNamespace(
        init_options=lowlevel.create_initialization_options(),
        server=lowlevel,
        _negotiate_initialize=ServerRunner._negotiate_initialize,
    )
    result = ServerRunner._handle_initialize(runner, params)  # type: ignore[arg-type]
    dumped = _dump_result(result)
    return serialize_server_result("initialize", result.protocol_version, dumped)


def test_the_early_answer_is_the_sdks(engine: Any) -> None:
    """Every field the SDK would answer, for every version a client may ask for."""
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    for asked in (*HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01", "2026-07-28"):
        result = early_result(_params(asked))
        assert result == _sdk_answer(engine, _params(asked)), asked
        expected = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        assert result is not None and result["protocolVersion"] == expected
        assert result["serverInfo"]["version"] == __version__
        assert result["instructions"] == SERVER_INSTRUCTIONS


def test_a_first_line_that_is_not_a_valid_initialize_is_left_to_the_sdk() -> None:
    lines = [
        b"not json\n",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize","params":{}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}\n',
        b'{"jsonrpc":"2.0","method":"initialize","params":{}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"no version"}}}\n',
    ]
    for line in lines:
        read_fd, write_fd = os.pipe()
        out_read, out_write = os.pipe()
        os.write(write_fd, line + b'{"second": 1}\n')
        early = EarlyInitialize(read_fd, out_write).start()
        time.sleep(0.2)
        early.finish()
        os.set_blocking(out_read, False)
        with pytest.raises(BlockingIOError):
            os.read(out_read, 100)  # nothing was answered
        assert early.answered is None
        assert early.read == line + b'{"second": 1}\n'  # all of it goes to the SDK
        for fd in (read_fd, write_fd, out_read, out_write):
            os.close(fd)


def test_a_reader_stopped_before_any_input_hands_over_nothing() -> None:
    read_fd, write_fd = os.pipe()
    early = EarlyInitialize(read_fd, write_fd).start()
    early.finish()
    assert (early.read, early.eof, early.answered) == (b"", False, None)
    os.close(write_fd)
    closed = EarlyInitialize(read_fd, 1).start()
    time.sleep(0.2)
    assert closed.finish().eof
    os.close(read_fd)


def _exchange(store: Path, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Write ``lines`` at once to a real ``smriti`` on stdio, close stdin, and return
    every message it wrote."""
    proc = subprocess.run(
        [smriti_command()],
        input="".join(json.dumps(m) + "\n" for m in lines).encode(),
        env=load_env(store, "early"),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def test_the_real_server_answers_initialize_once_and_then_serves(tmp_path: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _params("2025-06-18")}
    out = _exchange(
        tmp_path,
        [
            init,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "smriti_store", "arguments": {"content": "Early bird"}},
            },
        ],  # fmt: skip
    )
    by_id: dict[int, list[dict[str, Any]]] = {}
    for message in out:
        by_id.setdefault(message.get("id"), []).append(message)
    assert len(by_id[1]) == 1  # answered early, and the SDK's own answer was not sent
    assert by_id[1][0]["result"] == early_result(_params("2025-06-18"))
    assert {t["name"] for t in by_id[2][0]["result"]["tools"]} >= {"smriti_store"}
    assert not by_id[3][0]["result"].get("isError"), by_id[3]


def test_the_real_server_leaves_a_bad_first_line_to_the_sdk(tmp_path: Path) -> None:
    bad = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"capabilities": 3}}
    out = _exchange(tmp_path, [bad])
    [answer] = [m for m in out if m.get("id") == 7]
    assert "error" in answer  # the SDK's invalid-params error, not an early success
