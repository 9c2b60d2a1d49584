"""Many users in one ``smriti serve --transport http`` process on Kùzu (the real console
script, the real SDK client over streamable HTTP, one API key per user).

The plugins' tests run the same workload on Neo4j and FalkorDB
(``plugins/smriti-backend-*/tests/test_http_users.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from smriti.testing.http_users import HttpServer, client, make_keys, many_users, user_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_twenty_users_at_once_on_kuzu(tmp_path: Path) -> None:
    """20 users x 50 mixed calls at once, each user's store behind its own owner
    process: no errors, no result of another user, no lost write."""
    env = user_env(
        os.environ,
        tmp_path / "store",
        DB_TYPE="kuzu",
        HOME=str(tmp_path),
        SMRITI_OWNER_IDLE="2",  # the owners leave soon after the server
    )
    figures = await many_users(env, tmp_path, "kuzu")
    print(f"\nkuzu: {figures}")
    assert figures["calls"] == 20 * 50 and figures["errors"] == 0, figures
    assert figures["leaks"] == 0 and figures["lost_writes"] == 0, figures
    assert figures["owner_processes"] == 20  # one store, one owner per user


@pytest.mark.anyio
async def test_least_recently_used_users_are_closed_and_reopened(tmp_path: Path) -> None:
    """With room for 2 users, 4 users in turn: memories are closed and opened again in
    the same process (Kùzu in process, SMRITI_OWNER=off), and nothing is lost."""
    env = user_env(
        os.environ,
        tmp_path / "store",
        DB_TYPE="kuzu",
        HOME=str(tmp_path),
        SMRITI_AUTH="keys",
        SMRITI_OWNER="off",
        SMRITI_MAX_LOADED_USERS="2",
    )
    users = [f"u{i}" for i in range(4)]
    tokens = make_keys(tmp_path / "store" / ".api-keys.json", users)
    with HttpServer(env, tmp_path / "server.log") as server:
        stored = {}
        for rounds in range(2):  # the second round reopens every user's store
            for user in users:
                async with client(server.url, tokens[user]) as session:
                    text = f"{user} parks bike number {rounds}"  # distinct: not a duplicate
                    done = await session.call_tool("smriti_store", {"content": text})
                    assert not done.is_error, done
                    stored.setdefault(user, []).append(done.structured_content["id"])
        for user in users:
            async with client(server.url, tokens[user]) as session:
                listed = await session.call_tool("smriti_recall", {"mode": "list", "limit": 10})
                ids = sorted(r["id"] for r in listed.structured_content["results"])
                assert ids == sorted(stored[user])
        log = server.text()
    assert log.count("user memory evicted") >= 6, log[-2000:]
    assert "Traceback" not in log
