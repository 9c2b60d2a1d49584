"""Read time of the MCP resources at scale: a memory (``memory://{id}``), the statistics
and the clusters, and ``smriti_recall`` (whose results link to them) for comparison.

The engine benchmark's synthetic corpus (bench/corpus.py) of ``--size`` memories is
bulk-imported into a fresh Kùzu store (bench/engine.py's import phase) and consolidated
once, so memories have Leiden clusters and a memory's resource names its cluster. Then
the installed ``smriti`` console script is started as an MCP client starts it (stdio,
the store reached through its owner process) and read with the MCP SDK client: each
kind once to warm up, then ``--rounds`` times (the clusters, which read every memory's
statistics, ``--rounds`` / 5 times). A time is from the request to its parsed answer.

    uv run --all-packages --all-extras python bench/resources.py --size 10k
    uv run --all-packages --all-extras python bench/resources.py --size 100k

Results: a table on stdout and JSON in bench/results/resources-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    configure_logging,
    latency_summary,
    machine,
    plugin_manager,
    table,
    timed,
    write_results,
)
from engine import parse_size, run_phase, store_env  # noqa: E402


def consolidate(env: dict[str, str]) -> dict[str, Any]:
    """Consolidate the imported store once (clusters), in this process."""
    from smriti.config import Settings
    from smriti.engine import Engine

    engine = Engine.from_settings(Settings.from_env(env), plugin_manager()).open()
    try:
        report, seconds = timed(engine.consolidate)
        return {"consolidate_s": round(seconds, 2), "clusters": report.clusters,
                "memories": engine.backend.count_engrams()}  # fmt: skip
    finally:
        engine.close()


async def sample(call: Callable[[int], Awaitable[Any]], rounds: int) -> dict[str, Any]:
    """Warm up once, then time ``rounds`` calls of ``call(i)``."""
    await call(0)
    times = []
    for i in range(rounds):
        started = time.perf_counter()
        await call(i + 1)
        times.append(time.perf_counter() - started)
    return latency_summary(times)


async def read_all(env: dict[str, str], rounds: int) -> dict[str, Any]:
    """Start the stdio server and time each kind of read."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    smriti = str(Path(sys.executable).with_name("smriti"))
    params = StdioServerParameters(command=smriti, env={**os.environ, **env})
    started = time.perf_counter()
    async with Client(stdio_client(params, errlog=sys.stderr), mode="legacy") as client:
        listed = await client.call_tool("smriti_recall", {"mode": "list", "limit": 50})
        uris = [r["uri"] for r in listed.structured_content["results"]]
        first_s = time.perf_counter() - started  # the owner opened the store by now
        words = " ".join(r["content"] for r in listed.structured_content["results"]).split()

        async def memory(i: int) -> Any:
            return await client.read_resource(uris[i % len(uris)])

        async def recall(i: int) -> Any:
            query = f"{words[(7 * i) % len(words)]} {words[(7 * i + 3) % len(words)]}"
            return await client.call_tool("smriti_recall", {"query": query, "limit": 10})

        return {
            "first_answer_s": round(first_s, 2),
            "memory": await sample(memory, rounds),
            "stats": await sample(lambda i: client.read_resource("memory://stats"), rounds),
            "clusters": await sample(
                lambda i: client.read_resource("memory://clusters"), max(1, rounds // 5)
            ),
            "recall": await sample(recall, rounds),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="10k", help="synthetic store size (10k, 100k)")
    parser.add_argument("--rounds", type=int, default=30, help="reads per kind")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    configure_logging(args.log_level)
    size = parse_size(args.size)
    result: dict[str, Any] = {"benchmark": "resources", "machine": machine(), "size": size}
    with tempfile.TemporaryDirectory(prefix="smriti-resources-bench-") as tmp:
        env = store_env("kuzu", size, tmp)
        env.update(LOG_LEVEL=args.log_level, SMRITI_OWNER_IDLE="5")
        result["import_s"] = run_phase("import", size, env, args)["import"].get("seconds")
        result.update(consolidate(env))
        try:
            result["reads"] = anyio.run(read_all, env, args.rounds)
        finally:
            smriti = [sys.executable, "-m", "smriti", "owner", "stop"]
            subprocess.run(smriti, env={**os.environ, **env}, check=False, capture_output=True)
    rows = [
        (kind, f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}", r["n"])
        for kind, r in result["reads"].items()
        if isinstance(r, dict)
    ]
    print(f"{result['memories']} memories, {result['clusters']} clusters; first answer "
          f"(owner opening the store) after {result['reads']['first_answer_s']} s")  # fmt: skip
    print(table(("read", "p50 ms", "p95 ms", "n"), rows))
    print(f"wrote {write_results('resources', result)}")


if __name__ == "__main__":
    main()
