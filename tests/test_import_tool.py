"""``smriti_manage`` action ``import``: a file's text brought in by a tool call, through the
real ``smriti`` console script over MCP stdio and on an authenticated team server, where
each user's import lands in that user's memory only and no path on the server is read."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.testing.http_users import HttpServer, client, make_keys, user_env

from .test_stdio import server_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

DATA = Path(__file__).parent / "data" / "importers"
MCP_MEMORY = (DATA / "mcp-memory" / "memory.jsonl").read_text(encoding="utf-8")
MEM0 = (DATA / "mem0-export.json").read_text(encoding="utf-8")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


async def _listed(session: Any) -> list[dict[str, Any]]:
    found = await session.call_tool("smriti_recall", {"mode": "list", "limit": 100})
    return _ok(found)["results"]  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_import_by_tool_call_previews_stores_and_adds_nothing_again(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "smriti"], env=server_env(tmp_path)
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as session:
            call = {"action": "import", "format": "mcp-memory", "content": MCP_MEMORY}
            preview = _ok(await session.call_tool("smriti_manage", {**call, "dry_run": True}))
            report = preview["imported"]
            assert (report["dry_run"], report["records"], report["stored"]) == (True, 8, 8)
            assert "nothing was stored" in preview["message"]
            assert await _listed(session) == []

            done = _ok(await session.call_tool("smriti_manage", call))["imported"]
            assert (done["stored"], done["associations"], done["rejected_count"]) == (8, 3, 0)
            stored = await _listed(session)
            assert len(stored) == 8
            assert {m["origin"] for m in stored} == {"import:mcp-memory"}
            assert "Is allergic to peanuts" in {m["content"] for m in stored}

            again = _ok(await session.call_tool("smriti_manage", call))["imported"]
            assert (again["stored"], again["already_there"]) == (0, 8)
            assert len(await _listed(session)) == 8

            folder = await session.call_tool(
                "smriti_manage", {"action": "import", "format": "basic-memory", "content": "x"}
            )
            assert folder.is_error and "smriti import --from basic-memory" in (
                folder.content[0].text
            )
            empty = await session.call_tool(
                "smriti_manage", {"action": "import", "format": "mem0", "content": " "}
            )
            assert empty.is_error and "content is required for action=import" in (
                empty.content[0].text
            )
            wrong = await session.call_tool(
                "smriti_manage",
                {"action": "import", "format": "mcp-memory", "content": "just some words\n"},
            )
            text = wrong.content[0].text
            assert wrong.is_error and "expected" in text and "smriti-import-" not in text
            assert len(await _listed(session)) == 8  # a refused import changed nothing
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


@pytest.mark.anyio
async def test_a_team_servers_import_lands_in_the_callers_memory_only(tmp_path: Path) -> None:
    env = user_env(
        os.environ, tmp_path / "store", DB_TYPE="kuzu", HOME=str(tmp_path),
        SMRITI_AUTH="keys", SMRITI_OWNER="off",
    )  # fmt: skip
    tokens = make_keys(tmp_path / "store" / ".api-keys.json", ["dana", "eli"])
    with HttpServer(env, tmp_path / "server.log") as server:
        async with client(server.url, tokens["dana"]) as dana:
            done = await dana.call_tool(
                "smriti_manage", {"action": "import", "format": "mem0", "content": MEM0}
            )
            report = _ok(done)["imported"]
            assert report["stored"] > 0 and report["path"] == "(text of memories.json)"
            mine = await _listed(dana)
            assert len(mine) == report["stored"]
            assert {m["origin"] for m in mine} == {"import:mem0"}
        async with client(server.url, tokens["eli"]) as eli:
            assert await _listed(eli) == []


def test_an_import_by_tool_call_is_bounded_and_names_the_command_for_more() -> None:
    from smriti.errors import InvalidInput
    from smriti.importers.run import TEXT_FILE_NAMES
    from smriti.requests import MAX_IMPORT_TEXT_CHARS, TEXT_IMPORT_FORMATS, ImportTextRequest

    # every format the tool takes has the file name its reader knows it by
    assert set(TEXT_FILE_NAMES) == set(TEXT_IMPORT_FORMATS)

    line = '{"type":"entity","name":"A","entityType":"t","observations":["x"]}\n'
    fits = line * (MAX_IMPORT_TEXT_CHARS // len(line))
    assert ImportTextRequest.parse("mcp-memory", fits).text == fits
    with pytest.raises(InvalidInput, match="use smriti import --from mcp-memory PATH"):
        ImportTextRequest.parse("mcp-memory", fits + line)
    with pytest.raises(InvalidInput, match="dry_run"):
        ImportTextRequest.parse("mem0", "[]", dry_run="maybe")
