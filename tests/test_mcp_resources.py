"""MCP resources (issue 41): a memory as ``memory://{memory_id}``, the statistics and the
clusters as ``memory://stats`` and ``memory://clusters``, and recall results that link
to them, read with the MCP SDK client.

The server is the real one throughout: in process on a real Kùzu store, the installed
``smriti`` console script over stdio (the store reached through its owner process), and
``smriti serve --transport http`` with one API key per user, where one user's memory
must never be readable by another.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from smriti.auth.keys import KeyStore
from smriti.engine import Engine
from smriti.mcp_server import build_server
from smriti.mcp_server.resources import RESOURCE_NOT_FOUND
from smriti.testing.http_users import HttpServer, client, make_keys, smriti_command, user_env

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="the owner needs Unix sockets"),
]

PASTA = "Alice's favourite pasta is carbonara with guanciale"
FIXED = "Alice's favourite pasta is cacio e pepe"
INVALID_PARAMS = -32602


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content  # type: ignore[no-any-return]


async def read(session: Client, uri: str) -> dict[str, Any]:
    """The JSON content of resource ``uri``."""
    found = await session.read_resource(uri)
    [content] = found.contents
    assert content.uri == uri and content.mime_type == "application/json"
    return json.loads(content.text)  # type: ignore[union-attr, no-any-return]


async def refused(session: Client, uri: str) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await session.read_resource(uri)
    assert "Traceback" not in caught.value.error.message
    return caught.value


async def remember(session: Client) -> tuple[str, str]:
    """Store a memory and correct it; (first version's id, current id)."""
    first = ok(await session.call_tool("smriti_store", {"content": PASTA, "tags": "food"}))["id"]
    corrected = await session.call_tool(
        "smriti_manage", {"action": "correct", "memory_id": first, "content": FIXED}
    )
    return first, ok(corrected)["corrected"]["new_id"]


async def test_resources_are_listed_and_recall_links_to_them(engine: Engine) -> None:
    async with Client(build_server(engine)) as session:
        listed = await session.list_resources()
        assert {r.uri: r.mime_type for r in listed.resources} == {
            "memory://stats": "application/json",
            "memory://clusters": "application/json",
        }
        [template] = (await session.list_resource_templates()).resource_templates
        assert template.uri_template == "memory://{memory_id}"
        assert template.mime_type == "application/json"
        first, current = await remember(session)
        answer = await session.call_tool("smriti_recall", {"query": "favourite pasta"})
        recalled = ok(answer)
        assert recalled["results"], recalled
        for item in recalled["results"]:
            assert item["uri"] == f"memory://{item['id']}"
        text, *links = answer.content
        assert json.loads(text.text) == recalled  # type: ignore[union-attr]
        assert [(link.type, link.uri, link.title) for link in links] == [  # type: ignore[union-attr]
            ("resource_link", r["uri"], r["summary"]) for r in recalled["results"]
        ]
        shown = await read(session, f"memory://{current}")
        assert shown["uri"] == f"memory://{current}"
        assert shown["memory"]["content"] == FIXED and shown["memory"]["tags"] == ["food"]
        assert [(v["id"], v["current"]) for v in shown["versions"]] == [
            (first, False),
            (current, True),
        ]
        assert {v["uri"] for v in shown["versions"]} == {f"memory://{first}", f"memory://{current}"}
        assert {"out"} == {a["direction"] for a in shown["associations"]}
        assert all(a["uri"] == f"memory://{a['id']}" for a in shown["associations"])
        old = await read(session, f"memory://{first}")
        assert old["memory"]["superseded_by"] == current
        assert ("in", "supersedes") in {
            (a["direction"], a["relation"]) for a in old["associations"]
        }
        stats = await read(session, "memory://stats")
        assert stats["user"] == "alice" and stats["engrams"] == engine.stats()["engrams"] == 2
        clusters = await read(session, "memory://clusters")
        assert clusters["total_memories"] == 2
        assert all(c["sample"]["uri"].startswith("memory://") for c in clusters["clusters"])


async def test_unknown_and_malformed_uris_are_clear_errors(engine: Engine) -> None:
    async with Client(build_server(engine)) as session:
        unknown = await refused(session, "memory://" + "0" * 32)
        assert unknown.code == RESOURCE_NOT_FOUND
        assert f"no memory with id {'0' * 32!r} for user 'alice'" in unknown.error.message
        too_long = await refused(session, "memory://" + "x" * 300)
        assert too_long.code == INVALID_PARAMS and "not a valid memory id" in too_long.error.message
        for uri in ("memory://a/b", "other://stats", "memory://stats/more"):
            wrong = await refused(session, uri)
            assert wrong.code == RESOURCE_NOT_FOUND
            assert "resources are memory://stats, memory://clusters and memory://{memory_id}" in (
                wrong.error.message
            )


def stdio_env(storage: Path, user: str) -> dict[str, str]:
    """What an MCP client gives the server: no API keys, a temporary store."""
    env = user_env(os.environ, storage, ACCESSING_USER=user, LOG_LEVEL="warning")
    env.update(HOME=str(storage.parent / "home"), SMRITI_OWNER_IDLE="5")
    return env


@asynccontextmanager
async def stdio(storage: Path, user: str = "alice") -> AsyncIterator[Client]:
    """An SDK client of the installed ``smriti`` console script over stdio."""
    params = StdioServerParameters(command=smriti_command(), env=stdio_env(storage, user))
    with (storage.parent / f"{user}-stderr.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as session:
            yield session


async def test_over_stdio_through_the_store_owner(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    async with stdio(storage) as session:
        first, current = await remember(session)
        listed = ok(await session.call_tool("smriti_recall", {"mode": "list", "limit": 10}))
        assert {r["uri"] for r in listed["results"]} == {f"memory://{current}"}
        shown = await read(session, f"memory://{current}")
        assert shown["memory"]["content"] == FIXED
        assert [v["id"] for v in shown["versions"]] == [first, current]
        assert (await read(session, "memory://stats"))["engrams"] == 2
        assert (await refused(session, "memory://" + "f" * 32)).code == RESOURCE_NOT_FOUND
    async with stdio(storage, "bob") as session:  # another user of the same store
        missing = await refused(session, f"memory://{current}")
        assert missing.code == RESOURCE_NOT_FOUND and "for user 'bob'" in missing.error.message
        assert "cacio" not in missing.error.message
    log = (tmp_path / "alice-stderr.log").read_text() + (tmp_path / "bob-stderr.log").read_text()
    assert "Traceback" not in log


async def test_a_team_server_keeps_each_users_resources_apart(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    env = user_env(os.environ, storage, DB_TYPE="kuzu", HOME=str(tmp_path), SMRITI_AUTH="keys")
    audit = tmp_path / "audit.jsonl"
    env.update(SMRITI_OWNER_IDLE="2", SMRITI_AUDIT_LOG=str(audit))
    keys_file = storage / ".api-keys.json"
    tokens = make_keys(keys_file, ["alice", "bob"])
    write_only = KeyStore(keys_file).create("alice", ("write",))
    with HttpServer(env, tmp_path / "server.log") as server:
        async with client(server.url, tokens["alice"]) as alice:
            first, current = await remember(alice)
            recalled = ok(await alice.call_tool("smriti_recall", {"query": "pasta"}))
            uris = {r["uri"] for r in recalled["results"]}
            assert f"memory://{current}" in uris
            assert (await read(alice, f"memory://{current}"))["memory"]["content"] == FIXED
        async with client(server.url, tokens["bob"]) as bob:
            for uri in (f"memory://{current}", f"memory://{first}"):
                missing = await refused(bob, uri)
                assert missing.code == RESOURCE_NOT_FOUND, missing.error
                assert "for user 'bob'" in missing.error.message
                assert "cacio" not in missing.error.message and "carbonara" not in str(
                    missing.error.data
                )
            stats = await read(bob, "memory://stats")
            assert stats["user"] == "bob" and stats["engrams"] == 0
            assert (await read(bob, "memory://clusters"))["total_memories"] == 0
        async with client(server.url, write_only) as writer:
            denied = await refused(writer, f"memory://{current}")
            assert "insufficient_scope" in denied.error.message
            assert "insufficient_scope" in (await refused(writer, "memory://stats")).error.message
        log = server.text()
    assert "Traceback" not in log
    reads = [
        r
        for r in map(json.loads, audit.read_text().splitlines())
        if r.get("tool") == "resources/read"
    ]
    seen = [(r["user"], r["action"], r.get("memory_ids", []), r["outcome"]) for r in reads]
    assert ("alice", "memory", [current], "ok") in seen
    assert ("bob", "memory", [current], "error") in seen and ("bob", "stats", [], "ok") in seen
    assert ("alice", "memory", [current], "error") in seen  # the write-only key, refused
    assert "cacio" not in audit.read_text() and "carbonara" not in audit.read_text()
