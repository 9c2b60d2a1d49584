"""Forget erases (issue 36): soon after ``forget`` returns (``SMRITI_ERASE_DELAY``), the
memory's text is in no file under the store, while the server still runs, after it
stopped, and after it was killed with the erase still pending.

The real ``smriti`` console script is driven by the MCP SDK client over stdio on the
embedded Kùzu store (reached through its owner process, as in production), and through
the CLI on the SQLite store. Every byte of every file under the store is searched for
a token that only the forgotten memory held (in its content, its tags and its cues).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from smriti.testing.owner_load import owner_pid

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the owner needs Unix sockets")

SCRIPT = Path(sys.executable).with_name("smriti")
SECRET_VARS = ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY", "DB_TYPE")
USER = "alice"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def token() -> str:
    """A word no other memory, cue or file holds (mixed case: cues are lower-cased)."""
    return "Zq" + uuid.uuid4().hex[:12] + "Vx"


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``needle`` in any letter case."""
    wanted = needle.lower().encode()
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with contextlib.suppress(FileNotFoundError):  # a scratch file gone meanwhile
                if wanted in path.read_bytes().lower():
                    found.append(str(path.relative_to(root)))
    return found


def server_env(storage: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update(
        STORAGE_LOCATION=str(storage),
        ACCESSING_USER=USER,
        HOME=str(storage.parent / "home"),
        SMRITI_EMBEDDER="lexical",
        BACKUP_TYPE="none",
        CONSOLIDATION_INTERVAL="0",
        LOG_LEVEL="warning",
        HF_HUB_OFFLINE="1",
        SMRITI_OWNER_IDLE="30",
        SMRITI_ERASE_DELAY="2",
    )
    env.update(extra)
    return env


@asynccontextmanager
async def served(storage: Path, **extra: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=str(SCRIPT), env=server_env(storage, **extra))
    with (storage.parent / "stderr.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            yield client


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def stop_owner(storage: Path) -> None:
    """Stop the store's owner cleanly (SIGTERM) and wait until it has exited."""
    pid = owner_pid(storage, USER)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the owner {pid} did not stop within 60 s")


@pytest.fixture
def storage(tmp_path: Path) -> Any:
    path = tmp_path / "store"
    yield path
    stop_owner(path)


FACTS = [f"the garden bed number {i} gets tomatoes and basil this spring" for i in range(12)]


@pytest.mark.anyio
async def test_a_forgotten_memory_is_in_no_file_of_the_kuzu_store(storage: Path) -> None:
    word = token()
    async with served(storage) as client:
        for fact in FACTS:
            ok(await client.call_tool("smriti_store", {"content": fact}))
    stop_owner(storage)  # a restart first: a store after a reopen once crashed the erase
    async with served(storage) as client:
        secret = ok(await client.call_tool("smriti_store", {
            "content": f"the locker word is {word} and the garden gate code too",
            "tags": f"{word.lower()},locker",
        }))  # fmt: skip
        ok(await client.call_tool("smriti_recall", {"query": word}))
        ok(await client.call_tool("smriti_manage", {"action": "stats"}))
        assert files_holding(storage, word), "the token never reached the store's files"
        forgotten = ok(await client.call_tool(
            "smriti_manage", {"action": "forget", "memory_id": secret["id"]}
        ))  # fmt: skip
        assert forgotten["forgotten"]["id"] == secret["id"]
        # Erased within SMRITI_ERASE_DELAY (2 s here) while the owner still runs.
        assert owner_pid(storage, USER) is not None
        assert erased_within(storage, word, 60)
        found = ok(await client.call_tool("smriti_recall", {"query": "garden tomatoes"}))
        assert found["results"], "the other memories survive the rebuilt store"
        ok(await client.call_tool("smriti_store", {"content": "a memory after the erase"}))
    stop_owner(storage)
    assert files_holding(storage, word) == []
    async with served(storage) as client:  # the rebuilt store opens with everything
        stats = ok(await client.call_tool("smriti_manage", {"action": "stats"}))["stats"]
    assert stats["engrams"] == len(FACTS) + 1


def erased_within(storage: Path, word: str, seconds: float) -> bool:
    """Whether every file under ``storage`` is free of ``word`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    while files_holding(storage, word):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


@pytest.mark.anyio
async def test_a_pending_erase_runs_at_close_and_after_a_kill(storage: Path) -> None:
    words = [token(), token()]
    for word, stop in zip(words, ("clean", "kill"), strict=True):
        async with served(storage, SMRITI_ERASE_DELAY="3600") as client:
            for fact in FACTS[:4]:
                ok(await client.call_tool("smriti_store", {"content": fact}))
            held = ok(await client.call_tool(
                "smriti_store", {"content": f"the shed code is {word} until spring"}
            ))  # fmt: skip
            ok(await client.call_tool("smriti_manage", {"action": "stats"}))
            ok(await client.call_tool(
                "smriti_manage", {"action": "forget", "memory_id": held["id"]}
            ))  # fmt: skip
            gone = ok(await client.call_tool("smriti_recall", {"query": word}))
            assert all(word not in r["content"] for r in gone["results"])
        pid = owner_pid(storage, USER)
        assert pid is not None
        if stop == "clean":  # the owner's close runs the erase still pending
            stop_owner(storage)
            assert files_holding(storage, word) == []
        else:  # killed with the erase pending: the next start erases it
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            async with served(storage, SMRITI_ERASE_DELAY="1") as client:
                stats = ok(await client.call_tool("smriti_manage", {"action": "stats"}))
                assert erased_within(storage, word, 60)
            # The same four facts each round (repeats), and both held memories forgotten.
            assert stats["stats"]["engrams"] == len(FACTS[:4])


def smriti_cli(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(SCRIPT), *args, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_forgotten_memory_is_in_no_file_of_the_sqlite_store(storage: Path) -> None:
    env = server_env(storage, DB_TYPE="sqlite")
    word = token()
    for fact in FACTS[:5]:
        smriti_cli(env, "store", fact)
    secret = smriti_cli(env, "store", f"remember {word} for the garden gate", "--tags", word)
    assert files_holding(storage, word)
    smriti_cli(env, "forget", secret["id"])
    assert files_holding(storage, word) == []
    assert smriti_cli(env, "stats")["engrams"] == 5


def test_correct_with_purge_erases_the_old_version(storage: Path) -> None:
    env = server_env(storage)
    word = token()
    for fact in FACTS[:3]:
        smriti_cli(env, "store", fact)
    old = smriti_cli(env, "store", f"the wifi password hint is {word}")
    assert files_holding(storage, word)
    fixed = smriti_cli(env, "correct", old["id"], "the wifi hint is on the fridge", "--purge")
    assert fixed["purged"] == [old["id"]]
    assert files_holding(storage, word) == []
    history = smriti_cli(env, "history", fixed["new_id"])
    assert [v["id"] for v in history["versions"]] == [fixed["new_id"]]
    assert smriti_cli(env, "get", fixed["new_id"])["memory"]["supersedes"] == old["id"]


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def objects_holding(repo: Path, word: str, every: bool) -> list[str]:
    """Objects of ``repo`` holding ``word``: reachable ones (``rev-list --all
    --objects``), or with ``every`` all of them, unreachable ones included."""
    if every:
        listed = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=repo)
    else:
        listed = git("rev-list", "--all", "--objects", cwd=repo)
    shas = [line.split(" ")[0] for line in listed.splitlines() if line.strip()]
    needle = word.lower().encode()
    held = []
    for sha in shas:
        body = subprocess.run(["git", "cat-file", "-p", sha], cwd=repo, capture_output=True)
        if needle in body.stdout.lower():
            held.append(sha)
    return held


def test_smriti_purge_removes_a_memory_from_the_git_backup_history(
    storage: Path, tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(
        ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(remote)], check=True
    )
    env = server_env(storage, BACKUP_TYPE="git", GIT_BASE_URL=str(remote), BACKUP_SYNC_INTERVAL="0")
    word = token()
    smriti_cli(env, "store", FACTS[0])
    smriti_cli(env, "sync")
    secret = smriti_cli(env, "store", f"the alarm code is {word}", "--tags", word)
    smriti_cli(env, "sync")
    smriti_cli(env, "store", FACTS[1])
    smriti_cli(env, "sync")
    assert objects_holding(remote, word, every=False), "the token never reached the remote"
    done = subprocess.run(
        [str(SCRIPT), "purge", secret["id"], "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    purged = json.loads(done.stdout)
    assert purged["backup_purge"]["commits_rewritten"] >= 2
    assert "other clones" in done.stderr
    assert objects_holding(remote, word, every=False) == []
    local = storage / USER / "backup-git"
    assert objects_holding(local, word, every=True) == []
    assert files_holding(storage, word) == []
    assert (
        FACTS[1].encode()
        in subprocess.run(
            ["git", "show", f"main:{USER}/memory.jsonl"], cwd=remote, capture_output=True
        ).stdout
    )


@pytest.mark.anyio
async def test_manage_purge_and_a_purging_correction_over_mcp(storage: Path) -> None:
    from smriti.mcp_server.tools import needed_scope

    assert needed_scope("smriti_manage", {"action": "purge"}) == "write"
    first, second = token(), token()
    async with served(storage) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        props = tools["smriti_manage"].input_schema["properties"]
        assert "purge" in props["action"]["enum"] and props["purge"]["type"] == "boolean"
        for fact in FACTS[:4]:
            ok(await client.call_tool("smriti_store", {"content": fact}))
        old = ok(await client.call_tool("smriti_store", {"content": f"the PIN is {first}"}))
        other = ok(await client.call_tool("smriti_store", {"content": f"my alias {second}"}))
        assert files_holding(storage, first) and files_holding(storage, second)
        fixed = ok(await client.call_tool("smriti_manage", {
            "action": "correct", "memory_id": old["id"], "content": "the PIN changed",
            "purge": True,
        }))["corrected"]  # fmt: skip
        assert fixed["purged"] == [old["id"]]
        assert files_holding(storage, first) == []
        purged = ok(await client.call_tool(
            "smriti_manage", {"action": "purge", "memory_id": other["id"]}
        ))["purged"]  # fmt: skip
        assert purged["erased"] and purged["backup"] == "none" and purged["warning"]
        assert files_holding(storage, second) == []
        again = await client.call_tool(
            "smriti_manage", {"action": "purge", "memory_id": other["id"]}
        )  # a memory already forgotten here: only its backup would be purged
        assert not again.is_error, again.content
        missing = await client.call_tool(
            "smriti_manage", {"action": "purge", "memory_id": "f" * 32}
        )
        assert missing.is_error


def test_a_forget_from_another_machine_is_erased_at_the_next_sync(tmp_path: Path) -> None:
    import smriti_backend_kuzu.plugin as kuzu_plugin
    import smriti_backup_git.plugin as git_plugin

    from smriti.config import Settings
    from smriti.engine import Engine
    from smriti.plugins import create_plugin_manager

    remote = tmp_path / "remote.git"
    subprocess.run(
        ["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)], check=True
    )

    def machine(name: str) -> Engine:
        pm, _ = create_plugin_manager(load_entry_points=False, environ={})
        pm.register(kuzu_plugin)
        pm.register(git_plugin)
        env = {"STORAGE_LOCATION": str(tmp_path / name), "ACCESSING_USER": USER,
               "DB_TYPE": "kuzu", "SMRITI_EMBEDDER": "lexical", "BACKUP_TYPE": "git",
               "GIT_BASE_URL": str(remote), "CONSOLIDATION_INTERVAL": "0",
               "BACKUP_SYNC_INTERVAL": "0", "SMRITI_ERASE_DELAY": "1"}  # fmt: skip
        return Engine.from_settings(Settings.from_env(env), pm).open()

    word = token()
    one, two = machine("one"), machine("two")
    try:
        for fact in FACTS[:3]:
            one.store(fact)
        secret = one.store(f"the boat key is under {word}").engram.id
        one.sync()
        two.sync()
        store = tmp_path / "two" / USER
        assert files_holding(store, word), "the other machine never got the memory"
        one.forget(secret)
        one.sync()
        two.sync()
        assert two.backend.count_engrams() == 3
        # its git working copy keeps the old commits (other clones keep copies: purge
        # rewrites the remote); every file of the store itself is clean
        deadline = time.monotonic() + 60  # erased SMRITI_ERASE_DELAY after the merge
        while [f for f in files_holding(store, word) if not f.startswith("backup-git")]:
            assert time.monotonic() < deadline, files_holding(store, word)
            time.sleep(0.5)
    finally:
        one.close()
        two.close()


def test_reads_while_an_erase_rebuilds_the_store_all_succeed(engine_factory: Any) -> None:
    # With the working set off every read goes to the database, which an erase closes
    # and reopens (Kùzu); a read that had made its connection just before must retry.
    engine = engine_factory(SMRITI_WORKING_SET="off", SMRITI_ERASE_DELAY="0")
    ids = [engine.store(f"fact {i} about gardens and tomato {i * 7}").engram.id for i in range(40)]
    errors: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                engine.recall("tomato gardens", limit=5)
                engine.get(ids[-1])
                engine.stats()
            except Exception as exc:  # every failure is the finding
                errors.append(repr(exc))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for key in ids[:5]:
            engine.forget(key)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert errors == []
    assert engine.stats()["engrams"] == len(ids) - 5
