"""Time a newcomer's first use: a fresh clone to the first recall answered over MCP.

Clones the repository into a temporary directory and, with an empty uv cache (unless
``--warm-cache``), an empty store and an empty model cache, starts the README's quick
start command (``uv run --no-dev --package smriti-server smriti``) as an MCP stdio
server with the SDK client; then one ``smriti_store`` and one ``smriti_recall``.
Prints the times and writes JSON to ``bench/results/first_use-<UTC>.json``.

    uv run python bench/first_use.py [--repo PATH] [--warm-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import machine, write_results
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

QUICK_START = ["run", "--no-dev", "--package", "smriti-server", "smriti"]


async def first_recall(clone: Path, env: dict[str, str]) -> dict[str, float | bool]:
    """Start the quick-start server in ``clone``; time initialize, a store and a recall."""
    uv = shutil.which("uv") or "uv"
    params = StdioServerParameters(
        command=uv, args=["--directory", str(clone), *QUICK_START], env=env
    )
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ready = time.perf_counter()
        await session.call_tool("smriti_store", {"content": "I prefer tabs over spaces"})
        result = await session.call_tool("smriti_recall", {"query": "tabs or spaces?"})
        done = time.perf_counter()
    return {
        "initialize_s": round(ready - started, 2),
        "store_and_recall_s": round(done - ready, 2),
        "recall_error": bool(result.is_error),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--warm-cache", action="store_true", help="keep uv's own cache")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smriti-first-use-") as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "STORAGE_LOCATION": str(root / "store"),
            "XDG_CACHE_HOME": str(root / "cache"),
            # The store's owner process leaves soon after, not 5 minutes into a removed
            # directory; the time to the first recall does not depend on it.
            "SMRITI_OWNER_IDLE": "3",
        }
        for key in ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY", "VIRTUAL_ENV"):
            env.pop(key, None)
        if not args.warm_cache:
            env["UV_CACHE_DIR"] = str(root / "uv-cache")
        started = time.perf_counter()
        clone = root / "smriti"
        subprocess.run(["git", "clone", "--quiet", args.repo, str(clone)], check=True)
        cloned = time.perf_counter()
        figures = asyncio.run(first_recall(clone, env))
        total = time.perf_counter() - started
    figures = {
        "clone_s": round(cloned - started, 2),
        **figures,
        "clone_to_first_recall_s": round(total, 2),
        "warm_uv_cache": args.warm_cache,
    }
    for key, value in figures.items():
        print(f"{key:26} {value}")
    print(write_results("first_use", {"machine": machine(), **figures}))


if __name__ == "__main__":
    main()
