"""The real ``smriti`` on stdio against what a careless or hostile client sends: every
request is answered, the server keeps serving, and a client that leaves early gets
exit code 0 and no traceback (issue 36, smaller defects)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smriti.testing.owner_load import load_env, smriti_command

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX pipes and signals")

PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "defects-test", "version": "0"},
}
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": PARAMS}) + "\n"
READY = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"


def _call(key: int, tool: str, arguments: dict[str, Any]) -> str:
    params = {"name": tool, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": key, "method": "tools/call", "params": params})


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A store of its own; its owner process is stopped afterwards."""
    environment = load_env(tmp_path / "store", "defects", LOG_LEVEL="info", SMRITI_OWNER_IDLE="5")
    yield environment
    subprocess.run([smriti_command(), "owner", "stop"], env=environment, capture_output=True)


def _exchange(env: dict[str, str], lines: list[str]) -> tuple[dict[Any, dict[str, Any]], str]:
    """Write ``lines`` to a real ``smriti``, close stdin; the answers by id, and stderr.
    The server must exit 0 without a traceback."""
    proc = subprocess.run(
        [smriti_command()],
        input="".join(line if line.endswith("\n") else line + "\n" for line in lines).encode(),
        env=env,
        capture_output=True,
        timeout=120,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    answers: dict[Any, Any] = {None: []}  # answers without an id, in order
    for line in proc.stdout.decode().splitlines():
        message = json.loads(line)
        key = message.get("id")
        if key is None:
            answers[None].append(message)
            continue
        assert key not in answers, f"two answers for request {key}"
        answers[key] = message
    return answers, stderr


def _tool_error(answer: dict[str, Any]) -> str:
    result = answer["result"]
    assert result.get("isError") is True, answer
    return result["content"][0]["text"]


def test_a_deeply_nested_line_is_answered_and_the_server_goes_on(env: dict[str, str]) -> None:
    nested = "[" * 2000  # 2,000 levels overflow json.loads' recursion limit
    store = _call(3, "smriti_store", {"content": "after the nested line"})
    answers, stderr = _exchange(
        env, [nested, INIT, READY, nested, "]" * 50 + "{", json.dumps({"foo": 1}), store]
    )
    codes = [m["error"]["code"] for m in answers[None]]  # id null (JSON-RPC 2.0)
    assert codes == [-32700, -32700, -32700, -32600]  # 3 parse errors, 1 invalid request
    assert "result" in answers[1]
    assert not answers[3]["result"].get("isError"), answers[3]
    assert stderr.count("is not a JSON-RPC message") == 4  # one log line per bad line


def test_a_lone_surrogate_in_an_argument_is_answered(env: dict[str, str]) -> None:
    # Written by hand: json.dumps would escape the surrogate the same way, but this
    # shows what is on the wire.
    store = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"smriti_store",'
    store += '"arguments":{"content":"lone \\ud800 surrogate"}}}'
    recall = store.replace('"id":2', '"id":3').replace("smriti_store", "smriti_recall")
    recall = recall.replace('"content"', '"query"')
    pair = _call(4, "smriti_store", {"content": "a valid pair \U0001f600 is fine"})
    answers, _ = _exchange(env, [INIT, READY, store, recall, pair])
    for key in (2, 3):
        error = answers[key]["error"]
        assert error["code"] == -32700
        assert "surrogate" in error["message"] and "UTF-8" in error["message"]
    assert not answers[4]["result"].get("isError"), answers[4]


def test_missing_and_mistyped_arguments_are_said_in_words(env: dict[str, str]) -> None:
    calls = [
        _call(2, "smriti_store", {}),
        _call(3, "smriti_manage", {}),
        _call(4, "smriti_recall", {"query": 5}),
        _call(5, "smriti_store", {"content": {"text": "x"}, "source": None}),
        _call(6, "smriti_manage", {"action": "get", "memory_id": ["x"]}),
    ]
    answers, _ = _exchange(env, [INIT, READY, *calls])
    texts = {key: _tool_error(answers[key]) for key in range(2, 7)}
    for text in texts.values():
        assert "validation error" not in text and "pydantic" not in text, text
        assert "[type=" not in text, text
    assert "content is required: the text to remember" in texts[2]
    assert "action is required: get, correct" in texts[3]
    assert "query must be a string, got a number" in texts[4]
    assert "content must be a string, got an object" in texts[5]
    assert "source must be a string, got null" in texts[5]
    assert "memory_id must be a string, got an array" in texts[6]


def _cold_start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A server on a store nobody has opened yet (its owner starts with it)."""
    return subprocess.Popen(
        [smriti_command()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _finish(proc: subprocess.Popen[bytes], env: dict[str, str]) -> tuple[int, str]:
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    code = proc.wait(timeout=60)
    subprocess.run([smriti_command(), "owner", "stop"], env=env, capture_output=True)
    return code, stderr


@pytest.mark.parametrize("reads_answer", [False, True])
def test_a_client_that_quits_after_initialize_leaves_exit_zero(
    tmp_path: Path, reads_answer: bool
) -> None:
    for attempt in range(4):
        env = load_env(tmp_path / f"store{attempt}", "quits", LOG_LEVEL="info")
        proc = _cold_start(env)
        assert proc.stdin and proc.stdout
        proc.stdin.write(INIT.encode())
        proc.stdin.flush()
        if reads_answer:
            assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdin.close()  # stdin and stdout closed together: the client is gone
        proc.stdout.close()
        code, stderr = _finish(proc, env)
        assert code == 0, stderr[-3000:]
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0])
def test_repeated_signals_after_an_early_eof_leave_exit_zero(tmp_path: Path, delay: float) -> None:
    """The MCP SDK's client closes stdin and then signals the whole process group; a
    second SIGTERM used to escape from the first one's cleanup as a traceback."""
    env = load_env(tmp_path / "store", "signals", LOG_LEVEL="info")
    proc = _cold_start(env)
    assert proc.stdin and proc.stdout
    proc.stdin.write(INIT.encode())
    proc.stdin.close()
    assert json.loads(proc.stdout.readline())["id"] == 1  # the process is up and reading
    time.sleep(0.5 + delay)  # past the interpreter's start, into the store's opening
    for _ in range(3):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        time.sleep(0.005)
    code, stderr = _finish(proc, env)
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
