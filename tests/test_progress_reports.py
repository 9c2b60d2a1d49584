"""Progress of long operations: consolidation and sync phases, MCP progress
notifications from ``smriti_manage``, and the CLI's line on a terminal (through the
store's owner process)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from smriti.config import Settings
from smriti.engine import Engine
from smriti.mcp_server import build_server
from smriti.plugins import create_plugin_manager
from smriti.progress import Progress
from smriti.testing.owner_load import load_env


class Recorder:
    """A progress factory that keeps every phase and how far it got."""

    def __init__(self) -> None:
        self.phases: list[list[Any]] = []  # [label, total, done]

    def __call__(self, label: str, total: int | None) -> Progress:
        return _Recorded(self, label, total)


class _Recorded(Progress):
    def __init__(self, rec: Recorder, label: str, total: int | None) -> None:
        super().__init__(label, total, enabled=False)
        self.rec = rec
        rec.phases.append([label, total, 0])

    def set_label(self, label: str, total: int | None = None) -> None:
        self.rec.phases.append([label, total, 0])

    def advance(self, n: int = 1) -> None:
        self.rec.phases[-1][2] += n


def store_some(engine: Engine, n: int = 12) -> None:
    for i in range(n):
        engine.store(f"note {i} about gardening, tomatoes and compost number {i % 3}")


def test_consolidation_reports_its_phases(engine: Engine) -> None:
    store_some(engine)
    rec = Recorder()
    engine.consolidate(progress=rec)
    labels = [p[0] for p in rec.phases]
    assert labels[0] == "consolidating: memories" and rec.phases[0][1:] == [12, 12]
    assert "consolidating: pruning" in labels and labels[-1] == "consolidating: writing"
    assert rec.phases[-1][1] == rec.phases[-1][2]  # every update written was counted


def test_sync_names_its_phases(tmp_path: Path) -> None:
    import smriti_backend_kuzu.plugin as kuzu_plugin
    import smriti_backup_git.plugin as git_plugin

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(kuzu_plugin, name="smriti-backend-kuzu")
    pm.register(git_plugin, name="smriti-backup-git")
    settings = Settings.from_env(
        {
            "STORAGE_LOCATION": str(tmp_path / "store"),
            "ACCESSING_USER": "alice",
            "BACKUP_TYPE": "git",
            "GIT_BASE_URL": str(remote),
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
        }
    )
    with Engine.from_settings(settings, pm=pm) as engine:
        store_some(engine, 3)
        rec = Recorder()
        engine.sync(progress=rec)
    labels = [p[0] for p in rec.phases]
    assert labels[1:] == [
        "sync: fetching from git and merging",
        "sync: exporting the store",
        "sync: pushing to git",
    ], labels


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_manage_consolidate_sends_mcp_progress(engine: Engine, anyio_backend: str) -> None:
    store_some(engine)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(build_server(engine)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "ctx" not in tools["smriti_manage"].input_schema["properties"]
        result = await client.call_tool(
            "smriti_manage", {"action": "consolidate"}, progress_callback=on_progress
        )
        assert not result.is_error, result
        quiet = await client.call_tool("smriti_manage", {"action": "consolidate"})
        assert not quiet.is_error, quiet
    values = [p for p, _, _ in seen]
    assert values == sorted(set(values)), "progress must grow with every notification"
    messages = [m or "" for _, _, m in seen]
    assert messages[0].startswith("consolidating: memories")
    assert any(m.startswith("consolidating: writing") for m in messages)


def test_cli_consolidate_draws_a_line_on_a_terminal(tmp_path: Path) -> None:
    env = load_env(
        tmp_path / "store", "tty-user", HOME=str(tmp_path / "home"), SMRITI_OWNER_IDLE="2"
    )
    run = [sys.executable, "-m", "smriti"]
    stored = subprocess.run([*run, "store", "tomatoes need compost"], env=env, capture_output=True)
    assert stored.returncode == 0, stored.stderr
    leader, follower = pty.openpty()
    done = subprocess.run(
        [*run, "consolidate"], env=env, stdout=subprocess.PIPE, stderr=follower, timeout=120
    )
    os.close(follower)
    drawn = _read_all(leader)
    assert done.returncode == 0, drawn
    assert "consolidating: memories" in drawn and "consolidating: writing" in drawn
    piped = subprocess.run([*run, "consolidate"], env=env, capture_output=True, text=True)
    assert piped.returncode == 0 and "consolidating" not in piped.stderr  # not a terminal


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_stdio_server_through_the_owner_sends_progress(
    tmp_path: Path, anyio_backend: str
) -> None:
    """The real path: a stdio server whose store is in the owner process; the owner's
    progress reaches the server's reader thread and becomes MCP notifications."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = load_env(
        tmp_path / "store", "stdio-progress", HOME=str(tmp_path / "home"), SMRITI_OWNER_IDLE="2"
    )
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    params = StdioServerParameters(command=sys.executable, args=["-m", "smriti"], env=env)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            for i in range(5):
                stored = await client.call_tool("smriti_store", {"content": f"whale song {i}"})
                assert not stored.is_error, stored
            done = await client.call_tool(
                "smriti_manage", {"action": "consolidate"}, progress_callback=on_progress
            )
            assert not done.is_error, done
    assert seen, (tmp_path / "stderr.log").read_text()
    assert [p for p, _ in seen] == sorted({p for p, _ in seen})
    assert (seen[0][1] or "").startswith("consolidating: memories")
