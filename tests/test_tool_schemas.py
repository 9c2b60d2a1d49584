"""The MCP surface clients depend on stays as it is: the three tools' names, input and
output schemas, annotations and descriptions, and the prompt, compared with
``tests/tool_schemas.json`` (what the SDK's in-memory client lists).

A change there is a change for every client: when it is meant, write the file again
from ``list_tools``/``list_prompts`` as this test reads them, and say so in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from smriti.engine import Engine
from smriti.mcp_server import build_server

pytestmark = pytest.mark.anyio

PINNED = Path(__file__).with_name("tool_schemas.json")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _listed(engine: Engine) -> dict[str, Any]:
    async with Client(build_server(engine)) as client:
        tools = await client.list_tools()
        prompts = await client.list_prompts()
    return {
        "tools": [t.model_dump(mode="json") for t in tools.tools],
        "prompts": [p.model_dump(mode="json") for p in prompts.prompts],
    }


async def test_the_tools_and_the_prompt_are_listed_as_pinned(engine: Engine) -> None:
    listed = json.loads(json.dumps(await _listed(engine), sort_keys=True))
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    assert [t["name"] for t in listed["tools"]] == [t["name"] for t in pinned["tools"]]
    for got, want in zip(listed["tools"], pinned["tools"], strict=True):
        for part in ("inputSchema", "outputSchema", "annotations", "description", "title"):
            assert got.get(part) == want.get(part), f"{want['name']}: {part} changed"
    assert listed == pinned
