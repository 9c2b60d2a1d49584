"""Several ``smriti`` processes of one user on one embedded store, through its owner.

Everything here runs the real console script: stdio servers driven by the MCP SDK
client, CLI commands, the owner process they start, and ``SIGKILL``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from smriti.testing.owner_load import cli, load_env, owner_pid, run_load, smriti_command

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="Unix sockets and flock")

USER = "load"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A store directory; its owner is stopped when the test ends."""
    yield tmp_path / "store"
    _stop_owner(tmp_path / "store")


def _stop_owner(store: Path) -> None:
    pid = owner_pid(store, USER)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _json(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _wait_for(predicate, seconds: float = 20.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def _stdio_server(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A ``smriti`` stdio server, as an MCP client starts it; stopped by closing stdin."""
    server = subprocess.Popen(
        [smriti_command()],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield server
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=60)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by the process that started it) is dead too.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def test_three_servers_and_the_cli_share_one_store(store: Path) -> None:
    result = run_load(store, servers=3, calls_per_server=327, cli_calls=19)
    assert result.calls == 1000
    assert result.errors == []
    assert result.lost == [] and result.duplicated == 0
    assert len(result.exported) == len(result.stored)


def test_owner_killed_at_random_points_loses_nothing(store: Path) -> None:
    result = run_load(
        store, servers=3, calls_per_server=327, cli_calls=19, kill_every=(0.5, 2.5), seed=11
    )
    assert result.calls == 1000
    assert result.kills >= 3, result.to_dict()
    assert result.other_errors == [], result.other_errors[:5]
    assert result.lost == [], result.lost[:5]
    assert result.duplicated == 0
    assert len(result.exported) == len(result.stored)


def test_a_stale_socket_and_status_file_are_cleaned_up(store: Path) -> None:
    env = load_env(store, USER)
    _json(cli(env, "store", "the stale socket memory", "--json"))
    pid = owner_pid(store, USER)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert _wait_for(lambda: not _alive(pid))
    assert (store / USER / "owner.sock").exists()  # left behind by the dead owner
    found = _json(cli(env, "recall", "stale socket", "--json"))
    assert [r["content"] for r in found["results"]] == ["the stale socket memory"]
    assert owner_pid(store, USER) not in (None, pid)


def test_an_idle_owner_leaves_and_the_next_command_starts_one(store: Path) -> None:
    env = load_env(store, USER, SMRITI_OWNER_IDLE="1")
    _json(cli(env, "store", "an idle owner memory", "--json"))
    pid = owner_pid(store, USER)
    assert pid is not None
    assert _wait_for(lambda: not _alive(pid), 15), "the idle owner did not leave"
    assert not (store / USER / "owner.sock").exists()
    assert not (store / USER / "owner.json").exists()
    assert _json(cli(env, "stats", "--json"))["engrams"] == 1


def test_a_second_owner_waits_instead_of_taking_over(store: Path) -> None:
    env = load_env(store, USER)
    _json(cli(env, "store", "first owner memory", "--json"))
    first = owner_pid(store, USER)
    rival = subprocess.Popen(
        [smriti_command(), "owner", "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2)
        assert rival.poll() is None  # waiting for the store's lock
        stats = _json(cli(env, "stats", "--json"))
        assert stats["owner_pid"] == first and stats["engrams"] == 1
        assert _alive(first)  # type: ignore[arg-type]
    finally:
        rival.terminate()
        rival.wait(timeout=30)


def test_stats_and_owner_status_name_the_attached_processes(store: Path) -> None:
    env = load_env(store, USER)
    with _stdio_server(env) as server:
        assert _wait_for(lambda: owner_pid(store, USER) is not None)
        status = _json(cli(env, "owner", "status", "--json"))
        kinds = {c["kind"] for c in status["clients"]}
        assert status["running"] and status["pid"] == owner_pid(store, USER)
        assert {"stdio server", "cli owner status"} <= kinds, kinds
        assert server.pid in {c["pid"] for c in status["clients"]}
        stats = _json(cli(env, "stats", "--json"))
        assert stats["owner_pid"] == status["pid"] and stats["attached_processes"] == 2
        text = cli(env, "owner", "status").stdout
        assert "stdio server" in text and str(server.pid) in text


def test_doctor_shows_the_owner(store: Path) -> None:
    env = load_env(store, USER)
    assert cli(env, "doctor").returncode in (0, 1)
    _json(cli(env, "store", "doctor owner memory", "--json"))
    report = _json(cli(env, "doctor", "--json"))
    owner = [c for c in report["checks"] if c["name"] == "owner"]
    assert owner and str(owner_pid(store, USER)) in owner[0]["detail"], report["checks"]


def test_owner_off_is_one_process_at_a_time(store: Path) -> None:
    env = load_env(store, USER, SMRITI_OWNER="off")
    with _stdio_server(env):
        assert _wait_for(lambda: (store / USER / "memory.lbug").exists())
        time.sleep(1)
        done = cli(env, "stats")
        assert done.returncode == 1 and "in use by another process" in done.stderr
        assert not (store / USER / "owner.sock").exists()


def test_other_settings_restart_an_owner_nobody_else_uses(store: Path) -> None:
    env = load_env(store, USER)
    _json(cli(env, "store", "settings memory", "--json"))
    first = owner_pid(store, USER)
    changed = {**env, "WEIGHT_RECENCY": "0.3"}
    assert _json(cli(changed, "stats", "--json"))["owner_pid"] != first
    # With another process attached, the owner keeps its settings and says so.
    with _stdio_server(changed):
        assert _wait_for(lambda: _attached(env) >= 1)
        second = owner_pid(store, USER)
        done = cli(env, "stats", "--json")
        assert _json(done)["owner_pid"] == second
        assert "other settings" in done.stderr and "WEIGHT_RECENCY" in done.stderr


def _attached(env: dict[str, str]) -> int:
    status = _json(cli(env, "owner", "status", "--json"))
    return sum(c["kind"] == "stdio server" for c in status.get("clients", []))


def test_a_startup_error_reaches_the_command(store: Path) -> None:
    env = load_env(store, USER, SMRITI_EMBEDDER="no-such-embedder")
    done = cli(env, "stats")
    assert done.returncode == 2
    assert "SMRITI_EMBEDDER" in done.stderr and "Traceback" not in done.stderr
    assert owner_pid(store, USER) is None


NOBODY = 65534
PROBE = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("denied"); sys.exit(0)
try:
    s.sendall(b'{"id": 0, "op": "hello", "args": {}}\\n')
    s.settimeout(10)
    print("answered" if s.recv(65536) else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
"""


def test_another_uid_cannot_reach_the_owner() -> None:
    if os.geteuid() != 0:
        pytest.fail("needs root, to connect as another uid (nobody)")
    # A world-traversable store, so only the socket's mode and the uid check stand in
    # the way (the default store is in the user's home).
    root = Path(tempfile.mkdtemp(prefix="smriti-uid-"))
    root.chmod(0o755)
    store = root / "store"
    try:
        env = load_env(store, USER)
        _json(cli(env, "store", "private memory", "--json"))
        sock = store / USER / "owner.sock"
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        for folder in (store, store / USER):
            folder.chmod(0o755)
        probe = ["/usr/bin/python3", "-c", PROBE, str(sock)]
        as_nobody = {"user": NOBODY, "group": NOBODY, "capture_output": True, "text": True}
        assert subprocess.run(probe, **as_nobody, timeout=30).stdout.strip() == "denied"
        sock.chmod(0o666)  # even with the socket open to all, the owner checks the uid
        assert subprocess.run(probe, **as_nobody, timeout=30).stdout.strip() == "closed"
        log = (store / USER / "owner.log").read_text()
        assert "refused a connection from another user" in log
    finally:
        _stop_owner(store)
        _wait_for(lambda: owner_pid(store, USER) is None)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_http_server_a_stdio_server_and_the_cli_see_each_others_memories(
    store: Path,
) -> None:
    import socket

    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = load_env(store, USER)
    port = _free_port()
    http = subprocess.Popen(
        [smriti_command(), "serve", "--transport", "http", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert http.poll() is None, http.stderr.read()  # type: ignore[union-attr]
            await anyio.sleep(0.1)
        _json(cli(env, "store", "the shell stored the lighthouse key", "--json"))
        params = StdioServerParameters(command=smriti_command(), args=[], env=env)
        with open(os.devnull, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as stdio:
                stored = await stdio.call_tool(
                    "smriti_store", {"content": "the stdio client stored the garden gate"}
                )
                assert not stored.is_error, stored
                async with Client(f"http://127.0.0.1:{port}/mcp") as web:
                    for query, expected in (
                        ("lighthouse key", "the shell stored the lighthouse key"),
                        ("garden gate", "the stdio client stored the garden gate"),
                    ):
                        found = await web.call_tool("smriti_recall", {"query": query})
                        contents = [r["content"] for r in found.structured_content["results"]]
                        assert expected in contents, contents
        kinds = {c["kind"] for c in _json(cli(env, "owner", "status", "--json"))["clients"]}
        assert "http server" in kinds, kinds
    finally:
        http.terminate()
        http.wait(timeout=30)


def test_an_owner_that_cannot_listen_says_why_and_leaves_no_lock(store: Path) -> None:
    env = load_env(store, USER)
    blocker = store / USER / "owner.sock"
    blocker.mkdir(parents=True)  # a directory where the socket belongs
    done = cli(env, "stats")
    assert done.returncode == 1 and "owner.sock" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    blocker.rmdir()
    assert _json(cli(env, "stats", "--json"))["engrams"] == 0


def test_progress_of_a_long_operation_reaches_the_client(store: Path) -> None:
    from smriti.config import Settings
    from smriti.owner.client import RemoteService
    from smriti.progress import Progress

    env = load_env(store, USER)
    for i in range(2):
        _json(cli(env, "store", f"progress memory {i}", "--json"))
    calls: list[tuple[str, object]] = []

    class Recording(Progress):
        def __init__(self, label: str, total: int | None) -> None:
            super().__init__(label, total, enabled=False)
            calls.append(("start", (label, total)))

        def advance(self, n: int = 1) -> None:
            calls.append(("advance", n))

        def close(self) -> None:
            calls.append(("close", None))

    with RemoteService.connect(Settings.from_env(env), "test") as memory:
        report = memory.call("export", {"path": str(store.parent / "p.jsonl")}, Recording)
    assert report["counts"]["engrams"] == 2
    assert calls[0][0] == "start" and calls[0][1][0] == "export"  # type: ignore[index]
    assert sum(n for kind, n in calls if kind == "advance") >= 2  # type: ignore[misc]
    assert calls[-1] == ("close", None)


@pytest.mark.anyio
async def test_a_server_answers_its_client_while_the_store_is_not_ready(store: Path) -> None:
    """A large store takes seconds to open; MCP clients give up on a silent server.
    Here the owner waits for the store's lock (held by the test) as it would for a
    slow open: initialize is answered at once, and a call waits for the store."""
    import fcntl

    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = load_env(store, USER)
    (store / USER).mkdir(parents=True)
    held = os.open(store / USER / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    params = StdioServerParameters(command=smriti_command(), args=[], env=env)
    started = time.monotonic()
    try:
        with open(os.devnull, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                answered = time.monotonic() - started
                assert client.server_info.name == "smriti"

                async def release() -> None:
                    await anyio.sleep(2)
                    os.close(held)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(release)
                    stored = await client.call_tool("smriti_store", {"content": "waited"})
                waited = time.monotonic() - started
    finally:
        with contextlib.suppress(OSError):
            os.close(held)
    assert not stored.is_error, stored
    assert answered < 5, answered  # the server waits 1 s; a loaded machine adds more
    assert waited >= 2  # the call waited for the store


def test_a_store_path_too_long_for_a_socket_uses_a_private_runtime_dir(tmp_path: Path) -> None:
    store = tmp_path / ("a-rather-long-directory-name-" * 4) / "store"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = load_env(store, USER, XDG_RUNTIME_DIR=str(runtime))
    try:
        _json(cli(env, "store", "a memory behind a long path", "--json"))
        status = _json(cli(env, "owner", "status", "--json"))
        sock = Path(status["socket"])
        assert sock.parent == runtime / "smriti" and sock.exists()
        assert stat.S_IMODE((runtime / "smriti").stat().st_mode) == 0o700
        assert len(os.fsencode(str(store / USER / "owner.sock"))) > 100
        found = _json(cli(env, "recall", "long path", "--json"))
        assert found["results"][0]["content"] == "a memory behind a long path"
    finally:
        _stop_owner(store)
