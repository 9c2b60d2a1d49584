"""Versions, duplicates, conflicts, filters and paging through the real ``smriti`` console
script as a stdio MCP server, driven by the SDK client (issue 20).

Each test starts the installed console script as MCP clients do, on a store in a
temporary directory, with the built-in lexical embedder so that no model is loaded; the
embedded Kùzu store is reached through its owner process, as in production.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="the owner needs Unix sockets"),
]

SECRET_VARS = ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY")
SCRIPT = Path(sys.executable).with_name("smriti")  # the installed console script


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_env(storage: Path, user: str = "alice", **extra: str) -> dict[str, str]:
    """What an MCP client gives the server: no API keys, a temporary store."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update(
        STORAGE_LOCATION=str(storage),
        ACCESSING_USER=user,
        HOME=str(storage.parent / "home"),
        SMRITI_EMBEDDER="lexical",
        BACKUP_TYPE="none",
        CONSOLIDATION_INTERVAL="0",
        LOG_LEVEL="warning",
        HF_HUB_OFFLINE="1",
        SMRITI_OWNER_IDLE="5",  # the owner leaves soon after the test's last server
    )
    env.update(extra)
    return env


@asynccontextmanager
async def served(storage: Path, user: str = "alice", **extra: str) -> AsyncIterator[Client]:
    """An SDK client connected to a real ``smriti`` stdio server for ``user``."""
    params = StdioServerParameters(command=str(SCRIPT), env=server_env(storage, user, **extra))
    with (storage.parent / f"{user}-stderr.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            yield client


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert "Traceback" not in text and "internal error" not in text, text
    return text


async def store(client: Client, content: str, **arguments: Any) -> dict[str, Any]:
    return ok(await client.call_tool("smriti_store", {"content": content, **arguments}))


async def manage(client: Client, action: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool("smriti_manage", {"action": action, **arguments})


async def recall(client: Client, **arguments: Any) -> dict[str, Any]:
    return ok(await client.call_tool("smriti_recall", arguments))


async def listed_ids(client: Client, limit: int = 100, **arguments: Any) -> list[str]:
    found = await recall(client, mode="list", limit=limit, **arguments)
    return [r["id"] for r in found["results"]]


async def memory_count(client: Client) -> int:
    stats = ok(await manage(client, "stats"))["stats"]
    return int(stats["engrams"])


# --------------------------------------------------------------------------- contracts


async def test_tools_list_publishes_the_new_parameters_and_results(tmp_path: Path) -> None:
    async with served(tmp_path / "store") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        prompt = await client.get_prompt("smriti_system_prompt")
    manage_tool = tools["smriti_manage"]
    props = manage_tool.input_schema["properties"]
    assert {"action", "memory_id", "content", "importance", "tags", "limit", "memory_ids"} <= set(
        props
    )
    assert {
        "get", "correct", "history", "update", "related", "duplicates", "merge", "forget",
        "stats", "consolidate", "sync",
    } <= set(props["action"]["enum"])  # fmt: skip
    outputs = set(manage_tool.output_schema["properties"])
    assert {"memory", "corrected", "history", "updated", "related", "forgotten"} <= outputs
    assert {"duplicates", "merged"} <= outputs
    recall_props = tools["smriti_recall"].input_schema["properties"]
    assert {"tags", "tag_match", "since", "until", "include_superseded", "cursor"} <= set(
        recall_props
    )
    assert recall_props["tag_match"]["enum"] == ["any", "all"]
    assert "all" in recall_props["tags"]["description"]
    assert "next_cursor" in tools["smriti_recall"].output_schema["properties"]
    stored_props = set(tools["smriti_store"].output_schema["properties"])
    assert {"deduplicated", "near_duplicates", "possible_conflicts"} <= stored_props
    text = prompt.messages[0].content.text
    for word in ('"get"', '"correct"', '"related"', "possible_conflicts", "Do not forget it"):
        assert word in text, word


# --------------------------------------------------------------------------- versions


async def test_a_chain_of_three_versions(tmp_path: Path) -> None:
    async with served(tmp_path / "store") as client:
        v1 = await store(client, "Anand lives in Paris near the old canal", tags="home")
        sister = await store(client, "Anand's sister Meera visits Anand every summer")
        first = ok(
            await manage(
                client, "correct", memory_id=v1["id"],
                content="Anand lives in Berlin near the Spree",
            )
        )["corrected"]  # fmt: skip
        assert first["superseded"] == v1["id"] and first["memory"]["id"] == first["new_id"]
        v2 = first["new_id"]
        second = ok(
            await manage(
                client, "correct", memory_id=v2, content="Anand lives in Lisbon by the river",
                importance=0.8,
            )
        )["corrected"]  # fmt: skip
        v3 = second["new_id"]
        assert second["memory"]["importance"] == pytest.approx(0.8)
        assert second["memory"]["tags"] == ["home"]  # kept from the old version
        assert await memory_count(client) == 4

        for key in (v1["id"], v2, v3):
            chain = ok(await manage(client, "history", memory_id=key))["history"]
            assert [v["id"] for v in chain["versions"]] == [v1["id"], v2, v3]
        versions = chain["versions"]
        assert [v["content"] for v in versions] == [
            "Anand lives in Paris near the old canal",
            "Anand lives in Berlin near the Spree",
            "Anand lives in Lisbon by the river",
        ]
        assert [v["superseded_by"] for v in versions] == [v2, v3, ""]
        assert [v["supersedes"] for v in versions] == ["", v1["id"], v2]
        assert versions[0]["superseded_at"] and versions[2]["superseded_at"] is None

        # Recall leaves the old versions out unless asked.
        current = await recall(client, query="where does Anand live", limit=10)
        ids = [r["id"] for r in current["results"]]
        assert v3 in ids and v1["id"] not in ids and v2 not in ids
        everything = await recall(
            client, query="where does Anand live", limit=10, include_superseded=True
        )
        by_id = {r["id"]: r for r in everything["results"]}
        assert {v1["id"], v2, v3} <= set(by_id)
        assert by_id[v1["id"]]["superseded_by"] == v2 and by_id[v3]["supersedes"] == v2
        assert set(await listed_ids(client)) == {v3, sister["id"]}
        assert set(await listed_ids(client, include_superseded=True)) == {
            v1["id"], v2, v3, sister["id"],
        }  # fmt: skip

        detail = ok(await manage(client, "get", memory_id=v2))["memory"]
        assert detail["id"] == v2 and detail["content"] == "Anand lives in Berlin near the Spree"
        assert detail["versions"] == [v1["id"], v2, v3]
        assert detail["supersedes"] == v1["id"] and detail["superseded_by"] == v3
        assert {"anand"} <= {c["name"].lower() for c in detail["cues"]}
        assert {"decay_factor", "access_count", "cluster_id"} <= set(detail)
        linked = {(a["id"], a["relation"]) for a in detail["associations"]}
        assert (v1["id"], "supersedes") in linked and (v3, "supersedes") in linked
        assert all(a["direction"] in {"in", "out"} for a in detail["associations"])

        related = ok(await manage(client, "related", memory_id=v2))["related"]
        relations = {r["id"]: r["relation"] for r in related["related"]}
        assert relations[v1["id"]] == "supersedes" and relations[v3] == "superseded_by"
        around_v3 = ok(await manage(client, "related", memory_id=v3, limit=10))["related"]
        assert sister["id"] in {r["id"] for r in around_v3["related"]}
        strengths = [r["strength"] for r in around_v3["related"]]
        assert strengths == sorted(strengths, reverse=True)
        one = ok(await manage(client, "related", memory_id=v3, limit=1))["related"]
        assert len(one["related"]) == 1

        # An old version cannot be corrected: the error names the current one.
        refused = await manage(client, "correct", memory_id=v1["id"], content="Anand lives in Rome")
        assert v3 in error(refused)
        assert await memory_count(client) == 4
        chain = ok(await manage(client, "history", memory_id=v3))["history"]
        assert [v["id"] for v in chain["versions"]] == [v1["id"], v2, v3]


async def test_update_changes_importance_and_tags_in_place(tmp_path: Path) -> None:
    async with served(tmp_path / "store") as client:
        memory = await store(client, "The quarterly report is due on the 5th", tags="work, old")
        updated = ok(
            await manage(
                client, "update", memory_id=memory["id"], importance=0.9, tags="finance, q3"
            )
        )["updated"]
        assert updated["id"] == memory["id"]
        assert updated["importance"] == pytest.approx(0.9)
        assert updated["tags"] == ["finance", "q3"]
        detail = ok(await manage(client, "get", memory_id=memory["id"]))["memory"]
        assert detail["tags"] == ["finance", "q3"] and detail["versions"] == [memory["id"]]
        assert await listed_ids(client, tags="q3") == [memory["id"]]
        assert await listed_ids(client, tags="old") == []
        only_importance = ok(await manage(client, "update", memory_id=memory["id"], importance=0.2))
        assert only_importance["updated"]["tags"] == ["finance", "q3"]
        assert only_importance["updated"]["importance"] == pytest.approx(0.2)
        assert await memory_count(client) == 1
        assert "importance or tags" in error(await manage(client, "update", memory_id=memory["id"]))
        assert "importance" in error(
            await manage(client, "update", memory_id=memory["id"], importance=1.5)
        )


# --------------------------------------------------------------------------- duplicates


async def test_duplicates_and_a_conflict(tmp_path: Path) -> None:
    async with served(tmp_path / "store") as client:
        first = await store(client, "The team standup meeting is every Monday at 9am in room B")
        assert first["deduplicated"] is False and first["possible_conflicts"] == []
        exact = await store(client, "  the team standup MEETING is every monday at 9am in room b ")
        assert exact["deduplicated"] is True and exact["id"] == first["id"]
        near = await store(client, "The team standup meeting is every Monday at 9am, in room B!")
        assert near["deduplicated"] is True and near["id"] == first["id"]
        assert await memory_count(client) == 1

        vim = await store(client, "Priya's favourite editor for writing Go code at work is Vim")
        emacs = await store(client, "Priya's favourite editor for writing Go code at work is Emacs")
        assert emacs["deduplicated"] is False and emacs["id"] != vim["id"]
        conflicts = {c["id"]: c for c in emacs["possible_conflicts"]}
        assert vim["id"] in conflicts and first["id"] not in conflicts
        assert "Vim" in conflicts[vim["id"]]["summary"]
        assert 0.0 < conflicts[vim["id"]]["similarity"] < 1.0
        assert await memory_count(client) == 3
        # The agent then corrects the old one, which leaves recall.
        ok(await manage(client, "correct", memory_id=vim["id"], content=emacs["summary"]))
        assert vim["id"] not in await listed_ids(client)


async def test_distinct_facts_are_kept_and_a_group_can_be_merged(tmp_path: Path) -> None:
    async with served(tmp_path / "store", DEDUP_THRESHOLD="0.8") as client:
        a = await store(client, "We chose option A for the launch", tags="launch")
        b = await store(client, "We chose option B for the launch", importance=0.9)
        assert b["deduplicated"] is False and b["id"] != a["id"]
        assert [n["id"] for n in b["near_duplicates"]] == [a["id"]]
        retry = await store(client, "We chose option B for the launch.")
        assert retry["deduplicated"] is True and retry["id"] == b["id"]
        assert await memory_count(client) == 2

        found = ok(await manage(client, "duplicates"))["duplicates"]
        assert [sorted(m["id"] for m in g["memories"]) for g in found["groups"]] == [
            sorted([a["id"], b["id"]])
        ]
        done = ok(await manage(client, "merge", memory_id=b["id"], memory_ids=a["id"]))
        survivor = done["merged"]["memory"]
        assert done["merged"]["merged"] == [a["id"]] and survivor["id"] == b["id"]
        assert survivor["importance"] == 0.9 and survivor["tags"] == ["launch"]
        assert await listed_ids(client) == [b["id"]]
        history = ok(await manage(client, "history", memory_id=b["id"]))["history"]
        assert [m["id"] for m in history["merged"]] == [a["id"]]
        assert history["merged"][0]["content"] == "We chose option A for the launch"
        # A repeated merge changes nothing; a merge into itself or of nothing is an error.
        again = ok(await manage(client, "merge", memory_id=b["id"], memory_ids=a["id"]))
        assert again["merged"]["merged"] == [a["id"]]
        assert "itself" in error(
            await manage(client, "merge", memory_id=b["id"], memory_ids=b["id"])
        )
        assert "memory_ids" in error(await manage(client, "merge", memory_id=b["id"]))
        found = ok(await manage(client, "duplicates"))["duplicates"]
        assert found["groups"] == []


async def test_dedup_threshold_off_stores_every_copy(tmp_path: Path) -> None:
    async with served(tmp_path / "store", DEDUP_THRESHOLD="off") as client:
        one = await store(client, "Lunch is at noon on Fridays")
        two = await store(client, "Lunch is at noon on Fridays")
        assert two["deduplicated"] is False and two["id"] != one["id"]
        assert await memory_count(client) == 2


# --------------------------------------------------------------------------- filters


async def test_filters_by_tag_and_date_with_type_and_limit(tmp_path: Path) -> None:
    async with served(tmp_path / "store") as client:
        early = [
            await store(client, "How to deploy: run make release then tag it", tags="alpha, beta"),
            await store(client, "Yesterday we had lunch with Marco in Rome", tags="alpha"),
            await store(client, "Rome is the capital of Italy", tags="beta"),
            await store(client, "Gamma rays come from distant quasars", tags="gamma"),
        ]
        time.sleep(1.1)  # created_at of the two groups must differ by more than clock noise
        between = datetime.now(UTC).isoformat()
        time.sleep(1.1)
        late = [
            await store(client, "How to roll back: run make revert and redeploy", tags="alpha"),
            await store(client, "On Tuesday Marco flew back to Milan", tags="beta, alpha"),
        ]
        every = early + late
        ids = {m["id"] for m in every}
        assert len(ids) == 6 and all(not m["deduplicated"] for m in every)

        def having(*tags: str, match: str = "any", group: list[dict[str, Any]] = every) -> set[str]:
            test = all if match == "all" else any
            return {m["id"] for m in group if test(t in m["tags"] for t in tags)}

        assert set(await listed_ids(client, tags="alpha, beta")) == having("alpha", "beta")
        assert set(await listed_ids(client, tags="alpha,beta", tag_match="all")) == having(
            "alpha", "beta", match="all"
        )
        assert set(await listed_ids(client, tags="gamma")) == having("gamma")
        assert set(await listed_ids(client, since=between)) == {m["id"] for m in late}
        assert set(await listed_ids(client, until=between)) == {m["id"] for m in early}
        assert set(await listed_ids(client, tags="alpha", since=between)) == having(
            "alpha", group=late
        )
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
        assert await listed_ids(client, since=tomorrow) == []
        assert set(await listed_ids(client, until=tomorrow)) == ids
        naive = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
        assert set(await listed_ids(client, until=naive.isoformat())) == ids  # naive = UTC

        for kind in {m["memory_type"] for m in every}:
            typed = {m["id"] for m in every if m["memory_type"] == kind}
            found = await listed_ids(client, memory_type=kind, tags="alpha,beta")
            assert set(found) == typed & having("alpha", "beta"), kind

        # Filters apply before the limit: the newest memories do not match, yet a full
        # page of matching ones comes back.
        matching = having("beta", group=early)
        page = await recall(client, mode="list", limit=2, tags="beta", until=between)
        assert page["count"] == 2 and {r["id"] for r in page["results"]} <= matching
        assert all("beta" in r["tags"] for r in page["results"])

        searched = await recall(client, query="run make deploy release", tags="gamma")
        assert [r["id"] for r in searched["results"]] == []
        searched = await recall(client, query="run make deploy release", tags="alpha", limit=10)
        assert searched["results"] and {r["id"] for r in searched["results"]} <= having("alpha")

        for name, value in (("since", "last tuesday"), ("until", "2025-13-45")):
            assert name in error(await client.call_tool("smriti_recall", {name: value}))
        assert "tag_match" in error(
            await client.call_tool("smriti_recall", {"tags": "alpha", "tag_match": "most"})
        )
        assert "include_superseded" in error(
            await client.call_tool("smriti_recall", {"include_superseded": "perhaps"})
        )


# --------------------------------------------------------------------------- paging


def fill(storage: Path, user: str, count: int) -> None:
    """``count`` distinct memories, stored through the engine in this process before
    any server runs (quicker than as many tool calls)."""
    from smriti.config import Settings
    from smriti.engine import Engine
    from smriti.plugins import create_plugin_manager

    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(importlib.import_module("smriti_backend_kuzu.plugin"), name="smriti-backend-kuzu")
    settings = Settings.from_env(server_env(storage, user))
    words = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti") for b in "aeiou"]
    rng = random.Random(20)
    with Engine.from_settings(settings, pm=pm) as engine:
        for i in range(count):
            # Random words keep the memories far apart, so none counts as a duplicate.
            text = f"Note {i}: " + " ".join(rng.sample(words, 6))
            engine.store(text, tags="even" if i % 2 == 0 else "odd")


async def page_through(client: Client, limit: int, **filters: Any) -> list[str]:
    seen: list[str] = []
    cursor = ""
    for _ in range(1000):
        page = await recall(client, mode="list", limit=limit, cursor=cursor, **filters)
        assert page["count"] <= limit
        seen += [r["id"] for r in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
        assert page["count"] == limit  # a page with a next cursor is full
    raise AssertionError("the cursor never ended")


async def test_paging_through_250_memories_with_a_cursor(tmp_path: Path) -> None:
    storage = tmp_path / "store"
    fill(storage, "alice", 250)
    async with served(storage) as client:
        assert await memory_count(client) == 250
        seen = await page_through(client, 40)
        assert len(seen) == 250 and len(set(seen)) == 250  # no duplicates, no gaps
        one_page = await recall(client, mode="list", limit=100)
        assert seen[:100] == [r["id"] for r in one_page["results"]]  # the same order
        evens = await page_through(client, 33, tags="even")
        assert len(evens) == 125 and len(set(evens)) == 125
        assert set(evens) < set(seen)

        first = await recall(client, mode="list", limit=10)
        cursor = first["next_cursor"]
        assert cursor
        assert "cursor" in error(
            await client.call_tool("smriti_recall", {"mode": "list", "cursor": "not-a-cursor"})
        )
        assert "cursor" in error(
            await client.call_tool("smriti_recall", {"mode": "list", "cursor": cursor[:-6]})
        )
        other_filters = await client.call_tool(
            "smriti_recall", {"mode": "list", "cursor": cursor, "tags": "odd"}
        )
        assert "filters" in error(other_filters)

        async with served(storage, "bob") as bob:
            foreign = await bob.call_tool("smriti_recall", {"mode": "list", "cursor": cursor})
            assert "another user" in error(foreign)
            key = first["results"][0]["id"]
            for action, extra in ACTIONS_ON_ONE_MEMORY:
                result = await manage(bob, action, memory_id=key, **extra)
                assert key in error(result), action
            assert await memory_count(bob) == 0
        assert await memory_count(client) == 250
        assert key in await listed_ids(client)


ACTIONS_ON_ONE_MEMORY: list[tuple[str, dict[str, Any]]] = [
    ("get", {}),
    ("correct", {"content": "a correction of nothing"}),
    ("history", {}),
    ("update", {"importance": 0.7}),
    ("related", {}),
    ("forget", {}),
]


# --------------------------------------------------------------------------- bad input


async def test_bad_input_changes_nothing(tmp_path: Path) -> None:
    async with served(tmp_path / "store") as client:
        kept = await store(client, "Kept: the wifi password is on the fridge", tags="home")
        for action, extra in ACTIONS_ON_ONE_MEMORY:
            result = await manage(client, action, memory_id="no-such-memory", **extra)
            assert "no-such-memory" in error(result), action
            missing = await manage(client, action, **extra)
            assert "memory_id" in error(missing), action
        assert "content" in error(await manage(client, "correct", memory_id=kept["id"]))
        assert "content" in error(
            await manage(client, "correct", memory_id=kept["id"], content="   ")
        )
        assert "importance" in error(
            await manage(client, "correct", memory_id=kept["id"], content="x", importance="high")
        )
        assert "tags" in error(
            await manage(client, "update", memory_id=kept["id"], tags={"not": "tags"})
        )
        assert "limit" in error(await manage(client, "related", memory_id=kept["id"], limit=0))
        assert "action" in error(await manage(client, "rewrite", memory_id=kept["id"]))
        assert await memory_count(client) == 1
        detail = ok(await manage(client, "get", memory_id=kept["id"]))["memory"]
        assert detail["content"] == "Kept: the wifi password is on the fridge"
        assert detail["tags"] == ["home"] and detail["versions"] == [kept["id"]]
