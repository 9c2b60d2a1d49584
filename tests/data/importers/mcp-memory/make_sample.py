"""Make ``memory.jsonl`` here by running the reference memory server with its own tools.

Run with Node on the PATH (it was made with @modelcontextprotocol/server-memory 2026.8.31):
    uv run python tests/data/importers/mcp-memory/make_sample.py
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

VERSION = "2026.8.31"
HERE = Path(__file__).resolve().parent

ENTITIES = [
    {
        "name": "Priya_Raman",
        "entityType": "person",
        "observations": [
            "Prefers dark roast coffee, no sugar",
            "Works remotely from Pune on Tuesdays and Thursdays",
            "Is allergic to peanuts",
        ],
    },
    {
        "name": "Acme_Robotics",
        "entityType": "organization",
        "observations": ["Builds warehouse picking robots", "Headquartered in Bengaluru"],
    },
    {
        "name": "Project_Falcon",
        "entityType": "project",
        "observations": ["Migrates the fleet scheduler from Python 2 to Python 3.12"],
    },
    {"name": "Bengaluru", "entityType": "city", "observations": []},
]
RELATIONS = [
    {"from": "Priya_Raman", "to": "Acme_Robotics", "relationType": "works_at"},
    {"from": "Priya_Raman", "to": "Project_Falcon", "relationType": "leads"},
    {"from": "Acme_Robotics", "to": "Bengaluru", "relationType": "located_in"},
]


async def main() -> None:
    target = HERE / "memory.jsonl"
    target.unlink(missing_ok=True)
    server = StdioServerParameters(
        command="npx",
        args=["-y", f"@modelcontextprotocol/server-memory@{VERSION}"],
        env={**os.environ, "MEMORY_FILE_PATH": str(target)},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("create_entities", {"entities": ENTITIES})
        await session.call_tool("create_relations", {"relations": RELATIONS})
        added = [{"entityName": "Priya_Raman", "contents": ["Speaks Tamil and German"]}]
        await session.call_tool("add_observations", {"observations": added})


if __name__ == "__main__":
    asyncio.run(main())
