"""Smoke-test an installed ``smriti`` over MCP stdio, as an MCP client starts it.

    python release/smoke.py /path/to/venv/bin/smriti
    python release/smoke.py uv run --directory EXTENSION server/main.py

Run with the Python of the environment under test (it needs only the MCP SDK, which
``smriti-core`` installs). It starts the command with the SDK's stdio client, lists the
tools, stores one memory and recalls it, then closes stdin.
Exit 1 with a message on stderr names what failed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

TOOLS = {"smriti_store", "smriti_recall", "smriti_manage"}
FACT = "The release smoke test remembers that blue whales sing"


def server_env(home: Path) -> dict[str, str]:
    """A client's environment: a fresh store, no API keys, the model Hub out of reach
    (the server then uses its lexical embedder, so the smoke needs no download)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        STORAGE_LOCATION=str(home / "store"),
        ACCESSING_USER="smoke",
        HOME=str(home),
        HF_HUB_OFFLINE="1",
        CONSOLIDATION_INTERVAL="0",
    )
    return env


async def smoke(command: list[str], home: Path) -> dict[str, object]:
    """Talk to ``command`` over stdio; returns what was seen, raises on a failed check."""
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(home))
    with (home / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            info = client.server_info
            names = {t.name for t in (await client.list_tools()).tools}
            if not names >= TOOLS:
                raise AssertionError(f"tools {sorted(names)} lack {sorted(TOOLS - names)}")
            stored = await client.call_tool("smriti_store", {"content": FACT, "tags": "smoke"})
            if stored.is_error:
                raise AssertionError(f"smriti_store failed: {stored.content}")
            recalled = await client.call_tool("smriti_recall", {"query": "blue whales"})
            results = (recalled.structured_content or {}).get("results", [])
            if stored.structured_content["id"] not in [r["id"] for r in results]:
                raise AssertionError(f"the stored memory was not recalled: {results}")
    return {
        "server": info.name,
        "version": info.version,
        "tools": sorted(names),
        "recalled": len(results),
    }


def main(argv: list[str]) -> int:
    """Command line: the command (and its arguments) that starts the server."""
    if not argv:
        print("usage: python release/smoke.py PATH/TO/smriti [ARG...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="smriti-smoke-") as tmp:
        try:
            seen = anyio.run(smoke, argv, Path(tmp))
        except Exception as exc:  # any failure is the smoke test's verdict
            log = (Path(tmp) / "stderr.log").read_text()[-3000:]
            print(f"smoke: FAILED: {exc!r}\n--- server stderr ---\n{log}", file=sys.stderr)
            return 1
    print(json.dumps({"smoke": "ok", **seen}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
