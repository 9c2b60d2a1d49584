"""The MCP tools through the SDK's in-memory client, against a real Kùzu store on disk."""

from __future__ import annotations

import importlib
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

from smriti import validation
from smriti.config import Settings
from smriti.engine import Engine
from smriti.engine.recall import VECTOR_FLOOR
from smriti.mcp_server import build_server, run_engine
from smriti.mcp_server.tools import checked
from smriti.model import MEMORY_TYPES
from smriti.plugins import create_plugin_manager

pytestmark = pytest.mark.anyio

MAX_CHARS = 2000
RESULT_KEYS = {
    "id",
    "content",
    "summary",
    "memory_type",
    "importance",
    "tags",
    "source",
    "created_at",
    "score",
    "match_type",
    "hop",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_engine(storage: Path, user: str) -> Engine:
    """An engine on a real Kùzu store; plugins registered explicitly, no entry points."""
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(importlib.import_module("smriti_backend_kuzu.plugin"), name="smriti-backend-kuzu")
    settings = Settings.from_env(
        {
            "STORAGE_LOCATION": str(storage),
            "ACCESSING_USER": user,
            "DB_TYPE": "kuzu",
            "SMRITI_MAX_CONTENT_CHARS": str(MAX_CHARS),
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
        }
    )
    return Engine.from_settings(settings, pm=pm)


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def engine(storage: Path) -> Iterator[Engine]:
    with make_engine(storage, "alice") as opened:
        yield opened


@pytest.fixture
async def client(engine: Engine) -> AsyncIterator[Client]:
    async with Client(build_server(engine)) as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool(tool, arguments)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert "Traceback" not in text
    return text


def stored_count(engine: Engine) -> int:
    return engine.backend.count_engrams()


# --------------------------------------------------------------------------- listing


async def test_tools_have_schemas_and_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"smriti_store", "smriti_recall", "smriti_manage"}

    store = tools["smriti_store"]
    assert store.input_schema["required"] == ["content"]
    props = store.input_schema["properties"]
    assert set(props) == {"content", "importance", "tags", "source", "occurred_at", "origin"}
    assert props["origin"]["enum"] == ["agent", "user"] and props["origin"]["default"] == "agent"
    assert props["importance"]["type"] == "number"
    assert props["importance"]["default"] == 0.5
    assert props["tags"]["type"] == "string"
    assert {"id", "summary", "memory_type", "importance", "tags", "cues", "origin"} <= set(
        store.output_schema["properties"]
    )
    assert store.annotations.read_only_hint is False
    assert store.annotations.destructive_hint is False
    assert store.annotations.idempotent_hint is False

    recall = tools["smriti_recall"]
    assert set(recall.input_schema["properties"]) == {
        "query", "limit", "mode", "memory_type", "tags", "tag_match", "since", "until",
        "include_superseded", "cursor", "origin",
    }  # fmt: skip
    assert recall.input_schema["properties"]["include_superseded"]["type"] == "boolean"
    assert recall.input_schema.get("required", []) == []
    assert recall.input_schema["properties"]["limit"]["type"] == "integer"
    assert recall.input_schema["properties"]["mode"]["enum"] == ["recall", "search", "list"]
    assert "results" in recall.output_schema["properties"]
    assert recall.annotations.read_only_hint is True
    assert recall.annotations.idempotent_hint is True

    manage = tools["smriti_manage"]
    assert manage.input_schema["required"] == ["action"]
    assert set(manage.input_schema["properties"]) == {
        "action", "memory_id", "content", "importance", "tags", "limit", "memory_ids",
        "purge", "format", "dry_run",
    }  # fmt: skip
    assert "correct" in manage.input_schema["properties"]["action"]["enum"]
    assert manage.annotations.destructive_hint is True
    assert manage.output_schema is not None
    for tool in tools.values():
        assert len(tool.description) > 80


async def test_system_prompt_is_listed(client: Client) -> None:
    prompts = {p.name for p in (await client.list_prompts()).prompts}
    assert "smriti_system_prompt" in prompts
    got = await client.get_prompt("smriti_system_prompt")
    text = got.messages[0].content.text
    for word in ("smriti_store", "smriti_recall", "forget", "importance", "correct", "related"):
        assert word in text


# --------------------------------------------------------------------------- round trips


async def test_store_then_recall_round_trip(client: Client, engine: Engine) -> None:
    stored = await call(
        client,
        "smriti_store",
        content="Priya prefers tabs over spaces when writing Go code",
        importance=0.8,
        tags="coding, preferences",
        source="chat",
    )
    assert not stored.is_error, stored
    memory = stored.structured_content
    assert memory["memory_type"] in MEMORY_TYPES
    assert memory["importance"] == pytest.approx(0.8)
    assert memory["tags"] == ["coding", "preferences"]
    assert memory["source"] == "chat"
    assert memory["cues"] and all({"name", "type"} <= set(c) for c in memory["cues"])

    await call(client, "smriti_store", content="The office coffee machine is broken again")
    recalled = await call(client, "smriti_recall", query="Priya Go code tabs", limit=5)
    assert not recalled.is_error, recalled
    out = recalled.structured_content
    assert out["mode"] == "recall" and out["count"] == len(out["results"])
    first = out["results"][0]
    assert first["id"] == memory["id"]
    assert set(first) >= RESULT_KEYS
    assert first["content"] == "Priya prefers tabs over spaces when writing Go code"
    assert first["match_type"] in {"cue", "vector", "lexical", "association", "list"}

    listed = await call(client, "smriti_recall")
    assert listed.structured_content["mode"] == "list"
    assert {r["id"] for r in listed.structured_content["results"]} >= {memory["id"]}
    assert stored_count(engine) == 2


async def test_store_dates_an_event_with_occurred_at(client: Client) -> None:
    stored = await call(
        client, "smriti_store", content="We moved to Lisbon", occurred_at="2021-03-04"
    )
    assert not stored.is_error, stored
    assert stored.structured_content["created_at"] == "2021-03-04T00:00:00+00:00"
    bad = await call(client, "smriti_store", content="We moved", occurred_at="last spring")
    assert bad.is_error and "occurred_at" in str(bad.content)
    found = await call(client, "smriti_recall", query="moved Lisbon", until="2022-01-01")
    assert [r["id"] for r in found.structured_content["results"]] == [
        stored.structured_content["id"]
    ]


async def test_memory_type_filter_and_search_mode(client: Client) -> None:
    await call(client, "smriti_store", content="How to deploy: run make release then tag it")
    await call(client, "smriti_store", content="Yesterday we had lunch with Marco in Rome")
    result = await call(client, "smriti_recall", query="deploy release", mode="search", limit=2)
    assert not result.is_error
    assert all(r["match_type"] == "vector" for r in result.structured_content["results"])
    for kind in MEMORY_TYPES:
        filtered = await call(client, "smriti_recall", mode="list", memory_type=kind, limit=10)
        assert all(r["memory_type"] == kind for r in filtered.structured_content["results"])


async def test_search_mode_returns_nothing_below_the_similarity_floor(client: Client) -> None:
    await call(client, "smriti_store", content="How to deploy: run make release then tag it")
    await call(client, "smriti_store", content="Yesterday we had lunch with Marco in Rome")
    found = (
        await call(client, "smriti_recall", query="deploy release", mode="search")
    ).structured_content
    assert [r["content"] for r in found["results"]] == [
        "How to deploy: run make release then tag it"
    ]
    assert found["results"][0]["score"] >= VECTOR_FLOOR and found["degraded"] is False
    unrelated = await call(client, "smriti_recall", query="quantum zebra", mode="search")
    assert not unrelated.is_error and unrelated.structured_content["results"] == []
    assert "warning" not in unrelated.structured_content


async def test_metacharacters_and_unicode_round_trip_exactly(client: Client) -> None:
    content = (
        "MATCH (n) DETACH DELETE n; // ' \" ` $user {x: 1} \\n \\\\ [a]-[:R]->(b) "
        "-- 🧠 Ünïcödé 日本語 עברית\ttab"
    )
    tags = 'it\'s, "quoted", {braces}, $param, 東京, back\\slash'
    stored = await call(client, "smriti_store", content=content, tags=tags, source="`src` 'x'")
    assert not stored.is_error, stored
    memory_id = stored.structured_content["id"]
    expected_tags = ["it's", '"quoted"', "{braces}", "$param", "東京", "back\\slash"]
    assert stored.structured_content["tags"] == expected_tags

    listed = await call(client, "smriti_recall", mode="list", limit=10)
    (found,) = [r for r in listed.structured_content["results"] if r["id"] == memory_id]
    assert found["content"] == content
    assert found["tags"] == expected_tags
    assert found["source"] == "`src` 'x'"
    searched = await call(client, "smriti_recall", query="DETACH DELETE 日本語", limit=3)
    assert memory_id in {r["id"] for r in searched.structured_content["results"]}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({"content": ""}, "content"),
        ({"content": "   \n\t "}, "content"),
        ({"content": "x" * (MAX_CHARS + 1)}, "SMRITI_MAX_CONTENT_CHARS"),
        ({"content": "ok", "importance": -0.1}, "importance"),
        ({"content": "ok", "importance": 1.5}, "importance"),
        ({"content": "ok", "importance": math.nan}, "importance"),
        ({"content": "ok", "importance": math.inf}, "importance"),
        ({"content": "ok", "importance": "abc"}, "importance"),
        ({"content": "ok", "importance": True}, "importance"),
        ({"content": "ok", "importance": [0.5]}, "importance"),
        ({"content": "ok", "tags": ",".join(f"t{i}" for i in range(100))}, "tags"),
        ({}, "content"),
    ],
    ids=[
        "empty",
        "whitespace",
        "too-long",
        "importance-negative",
        "importance-over-1",
        "importance-nan",
        "importance-inf",
        "importance-abc",
        "importance-bool",
        "importance-list",
        "too-many-tags",
        "missing-content",
    ],
)
async def test_bad_store_input_is_a_tool_error_and_stores_nothing(
    client: Client, engine: Engine, arguments: dict[str, Any], mentions: str
) -> None:
    result = await client.call_tool("smriti_store", arguments)
    assert mentions in error_text(result)
    assert stored_count(engine) == 0


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": -1}, "limit"),
        ({"limit": 10**9}, "limit"),
        ({"limit": 2.5}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"mode": "telepathy"}, "mode"),
        ({"memory_type": "dream"}, "memory_type"),
        ({"query": "x", "mode": "search", "memory_type": "nightmare"}, "memory_type"),
    ],
)
async def test_bad_recall_input_is_a_tool_error(
    client: Client, arguments: dict[str, Any], mentions: str
) -> None:
    result = await client.call_tool("smriti_recall", arguments)
    assert mentions in error_text(result)


async def test_tags_may_also_be_a_list(client: Client) -> None:
    stored = await call(client, "smriti_store", content="listed tags", tags=["a, b", " c "])
    assert not stored.is_error, stored
    assert stored.structured_content["tags"] == ["a, b", "c"]
    bad = await call(client, "smriti_store", content="bad tags", tags={"not": "tags"})
    assert "tags" in error_text(bad)


async def test_limit_accepts_numeric_strings(client: Client) -> None:
    await call(client, "smriti_store", content="one memory")
    result = await call(client, "smriti_recall", limit="3")
    assert not result.is_error and result.structured_content["count"] == 1


async def test_unknown_action_and_missing_id(client: Client) -> None:
    assert "action" in error_text(await call(client, "smriti_manage", action="explode"))
    for action in ("forget", "get", "correct", "history", "update", "related"):
        text = error_text(await call(client, "smriti_manage", action=action))
        assert "memory_id" in text and action in text


async def test_correct_get_history_in_process(client: Client, engine: Engine) -> None:
    old = (
        await call(client, "smriti_store", content="The build server is called Zeus")
    ).structured_content
    corrected = await call(
        client, "smriti_manage", action=" Correct ", memory_id=old["id"],
        content="The build server is called Hera since May", tags="infra",
    )  # fmt: skip
    assert not corrected.is_error, corrected
    out = corrected.structured_content
    new_id = out["corrected"]["new_id"]
    assert out["corrected"]["superseded"] == old["id"] and new_id in out["message"]
    assert out["corrected"]["memory"]["tags"] == ["infra"]
    got = (await call(client, "smriti_manage", action="get", memory_id=new_id)).structured_content
    assert got["memory"]["versions"] == [old["id"], new_id]
    assert got["memory"]["supersedes"] == old["id"]
    history = await call(client, "smriti_manage", action="history", memory_id=old["id"])
    versions = history.structured_content["history"]["versions"]
    assert [v["id"] for v in versions] == [old["id"], new_id]
    assert versions[0]["superseded_by"] == new_id
    listed = (await call(client, "smriti_recall", mode="list")).structured_content
    assert [r["id"] for r in listed["results"]] == [new_id] and listed["next_cursor"] is None
    assert stored_count(engine) == 2


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({"since": "soon"}, "since"),
        ({"until": 20250101}, "until"),
        ({"tag_match": "some"}, "tag_match"),
        ({"include_superseded": "maybe"}, "include_superseded"),
        ({"cursor": 7}, "cursor"),
        ({"cursor": "garbage"}, "cursor"),
        ({"tags": {"a": 1}}, "tags"),
    ],
)
async def test_bad_recall_filters_are_tool_errors(
    client: Client, arguments: dict[str, Any], mentions: str
) -> None:
    result = await client.call_tool("smriti_recall", {"mode": "list", **arguments})
    assert mentions in error_text(result)


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({"action": "correct"}, "content"),
        ({"action": "correct", "content": 5}, "content"),
        ({"action": "update"}, "importance or tags"),
        ({"action": "update", "importance": "lots"}, "importance"),
        ({"action": "related", "limit": "x"}, "limit"),
    ],
)
async def test_bad_manage_arguments_name_the_parameter(
    client: Client, engine: Engine, arguments: dict[str, Any], mentions: str
) -> None:
    stored = await call(client, "smriti_store", content="one memory to manage")
    memory_id = stored.structured_content["id"]
    result = await client.call_tool("smriti_manage", {"memory_id": memory_id, **arguments})
    assert mentions in error_text(result)
    assert stored_count(engine) == 1


def test_read_actions_need_only_the_read_scope() -> None:
    from smriti.mcp_server.tools import needed_scope

    for action in ("get", "history", "related", "stats", " GET "):
        assert needed_scope("smriti_manage", {"action": action}) == "read"
    for action in ("correct", "update", "forget", "consolidate", "sync", "nonsense"):
        assert needed_scope("smriti_manage", {"action": action}) == "write"


async def test_forget_unknown_id_is_an_error(client: Client) -> None:
    result = await call(client, "smriti_manage", action="forget", memory_id="no-such-id")
    assert "no-such-id" in error_text(result)


async def test_forget_removes_the_memory(client: Client, engine: Engine) -> None:
    stored = await call(client, "smriti_store", content="temporary note to forget")
    memory_id = stored.structured_content["id"]
    result = await call(client, "smriti_manage", action="forget", memory_id=memory_id)
    assert not result.is_error, result
    assert result.structured_content["forgotten"]["id"] == memory_id
    assert stored_count(engine) == 0
    again = await call(client, "smriti_manage", action="forget", memory_id=memory_id)
    assert again.is_error


async def test_forget_of_another_users_memory_is_an_error(storage: Path) -> None:
    with make_engine(storage, "alice") as alice, make_engine(storage, "bob") as bob:
        async with Client(build_server(alice)) as as_alice, Client(build_server(bob)) as as_bob:
            stored = await call(as_alice, "smriti_store", content="alice's bank is Acme")
            memory_id = stored.structured_content["id"]
            result = await call(as_bob, "smriti_manage", action="forget", memory_id=memory_id)
            assert memory_id in error_text(result)
            seen_by_bob = await call(as_bob, "smriti_recall", query="alice bank Acme")
            assert seen_by_bob.structured_content["results"] == []
        assert stored_count(alice) == 1


# --------------------------------------------------------------------------- other actions


async def test_stats_consolidate_and_sync(client: Client, engine: Engine) -> None:
    await call(client, "smriti_store", content="a memory for the statistics")
    stats = await call(client, "smriti_manage", action="stats")
    assert not stats.is_error, stats
    assert stats.structured_content["stats"]["user"] == "alice"
    assert stats.structured_content["stats"]["backend"] == "kuzu"

    consolidated = await call(client, "smriti_manage", action=" Consolidate ")
    assert not consolidated.is_error, consolidated
    assert "pruned" in consolidated.structured_content["consolidation"]

    synced = await call(client, "smriti_manage", action="sync")
    assert not synced.is_error, synced
    assert synced.structured_content["sync"]["provider"] == "none"


async def test_engine_failure_is_a_tool_error_not_a_crash(client: Client, engine: Engine) -> None:
    engine.backend.close()  # the store goes away under the server
    result = await call(client, "smriti_store", content="written after the store closed")
    assert error_text(result)


# --------------------------------------------------------------------------- the edge itself


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, -0.01, 1.01, None, True, "", [1], "high"]
)
def test_importance_rejected_at_the_edge(value: Any) -> None:
    with pytest.raises(ToolError, match="importance"):
        checked(validation.importance, value)


def test_importance_accepts_numbers_and_numeric_strings() -> None:
    assert checked(validation.importance, 0) == 0.0
    assert checked(validation.importance, 1) == 1.0
    assert checked(validation.importance, " 0.25 ") == 0.25


async def test_unexpected_exception_becomes_a_generic_tool_error() -> None:
    def broken() -> None:
        raise RuntimeError("secret internal detail")

    with pytest.raises(ToolError) as caught:
        await run_engine(broken)
    assert "secret internal detail" not in str(caught.value)
    assert "server log" in str(caught.value)
