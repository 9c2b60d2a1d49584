"""Time a start on a large embedded store: MCP initialize, the first recall, the working set.

Builds a store (``--backend``: ``ladybug``, the default for a new store, or ``kuzu``; one
engine per run, as the two cannot share a process) of ``--size`` synthetic memories once
(bench/corpus.py, lexical vectors, bulk import; ``--store DIR`` keeps it between runs),
then, for each case,
starts the real ``smriti`` stdio server with the MCP SDK client, as an MCP client does,
and times ``initialize``, the first ``smriti_recall`` (from the process start) and the
next ``--recalls`` recalls; the owner process's log says when the working set was
loaded and from where. Cases, each with a new owner process:

- ``snapshot``: after a clean shutdown (the working set is loaded from its snapshot);
- ``no snapshot``: the snapshot deleted, as after a crash (loaded from the store);
- ``owner running``: a second server while the first one's owner still runs.

    uv run python bench/start.py [--size 100k] [--backend ladybug|kuzu] [--store DIR]

``--smriti`` runs another installation's console script (old code side by side). The
bytecode of that installation is compiled first, as an installed package has it (pip
compiles at install, uv with ``compile-bytecode``): a start must not be timed compiling
the workspace's own sources, which happens on every start under PYTHONDONTWRITEBYTECODE.
Results: a table on stdout and JSON in bench/results/start-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import configure_logging, machine, plugin_manager, table, write_results  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

USER = "startbench"
#: The engine of this run (``--backend``).
BACKEND = {"name": "ladybug"}


def settings_env(store: Path) -> dict[str, str]:
    return {
        "ACCESSING_USER": USER,
        "STORAGE_LOCATION": str(store),
        "DB_TYPE": BACKEND["name"],
        "SMRITI_EMBEDDER": "lexical",
        "SMRITI_CUE_EXTRACTOR": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "SMRITI_OWNER_IDLE": "600",
    }


def build_store(store: Path, size: int) -> None:
    """Generate and bulk-import the corpus, unless the store already holds it."""
    import corpus
    from engine import bulk_import

    from smriti.config import Settings
    from smriti.default_plugins.lexical_embedder import LexicalEmbedder
    from smriti.engine.core import Engine

    settings = Settings.from_env({**settings_env(store), "SMRITI_OWNER": "off"})
    with Engine.from_settings(settings, plugin_manager()) as engine:
        if engine.backend.count_engrams() >= size:
            return
        records = corpus.records(corpus.memories(size), LexicalEmbedder())
        print(json.dumps({"import": bulk_import(engine.backend, records)}), flush=True)


async def one_start(smriti: str, env: dict[str, str], queries: list[str]) -> dict[str, Any]:
    """Start a stdio server; time initialize, the first recall and the next ones."""
    params = StdioServerParameters(command=smriti, args=[], env=env)
    began = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter()
        first = await session.call_tool("smriti_recall", {"query": queries[0], "limit": 10})
        answered = time.perf_counter()
        times = []
        for query in queries[1:]:
            t = time.perf_counter()
            result = await session.call_tool("smriti_recall", {"query": query, "limit": 10})
            times.append(time.perf_counter() - t)
            if result.is_error:
                raise RuntimeError(f"recall failed: {result.content}")
    if first.is_error:
        raise RuntimeError(f"first recall failed: {first.content}")
    return {
        "initialize_s": round(initialized - began, 3),
        "first_recall_s": round(answered - began, 3),
        "next_recalls_p50_ms": round(statistics.median(times) * 1000, 1) if times else None,
    }


def compile_installation(smriti: str) -> None:
    """Compile the bytecode of everything the console script ``smriti`` imports from,
    except the standard library (its interpreter is the script's sibling)."""
    code = (
        "import compileall, os, sys\n"
        "for p in sys.path[1:]:\n"
        "    if os.path.isdir(p) and not p.startswith(sys.base_prefix):\n"
        "        compileall.compile_dir(p, quiet=1, workers=0)\n"
    )
    python = Path(smriti).with_name("python")
    subprocess.run([str(python), "-c", code], check=True, capture_output=True, timeout=600)


def owner(smriti: str, env: dict[str, str], action: str) -> None:
    subprocess.run([smriti, "owner", action], env=env, capture_output=True, timeout=120)


def wait_for_owner_exit(store: Path) -> None:
    """Wait until no owner holds the store's lock: ``owner stop`` gives up waiting after
    a minute, and an owner still saving its working set would write it again after the
    'no snapshot' case deleted it."""
    from smriti.cli.owner_command import wait_unlocked

    wait_unlocked(store / USER / "owner.lock", timeout=600.0)


def loaded(store: Path) -> dict[str, Any] | None:
    """The owner log's last 'working set loaded' event."""
    log = store / USER / "owner.log"
    found = None
    for line in (
        log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
    ):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "working set loaded":
            found = {k: event.get(k) for k in ("source", "seconds", "engrams", "mb")}
    return found


def run_case(name: str, smriti: str, store: Path, queries: list[str]) -> dict[str, Any]:
    env = {**os.environ, **settings_env(store)}
    if name != "owner running":
        owner(smriti, env, "stop")
        wait_for_owner_exit(store)
        (store / USER / "owner.log").unlink(missing_ok=True)
    if name == "no snapshot":
        shutil.rmtree(store / USER / "working-set", ignore_errors=True)
    row = {"case": name, **asyncio.run(one_start(smriti, env, queries))}
    deadline = time.monotonic() + 300
    while name != "owner running" and loaded(store) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    row["working_set"] = loaded(store)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="100k")
    parser.add_argument("--store", type=Path, default=None, help="keep the store here")
    parser.add_argument("--smriti", default=str(Path(sys.executable).parent / "smriti"))
    parser.add_argument("--recalls", type=int, default=20)
    parser.add_argument("--backend", default="ladybug", help="ladybug (default) or kuzu")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("warning")
    BACKEND["name"] = args.backend
    import corpus

    size = int(float(args.size[:-1]) * 1000) if args.size.endswith("k") else int(args.size)
    tmp = None if args.store else tempfile.TemporaryDirectory(prefix="smriti-start-")
    store = args.store or Path(tmp.name)  # type: ignore[union-attr]
    try:
        build_store(store, size)
        compile_installation(args.smriti)
        queries = corpus.queries(args.recalls + 1)
        rows = []
        for case in ("snapshot", "no snapshot", "snapshot", "owner running"):
            rows.append(run_case(case, args.smriti, store, queries))
            print(json.dumps(rows[-1]), flush=True)
        owner(args.smriti, {**os.environ, **settings_env(store)}, "stop")
    finally:
        if tmp is not None:
            owner(args.smriti, {**os.environ, **settings_env(store)}, "stop")
            tmp.cleanup()
    headers = ["case", "initialize s", "first recall s", "next recalls p50 ms", "working set"]
    body = [
        [r["case"], r["initialize_s"], r["first_recall_s"], r["next_recalls_p50_ms"],
         "" if not r["working_set"] else
         f"{r['working_set']['source']} {r['working_set']['seconds']} s"]
        for r in rows
    ]  # fmt: skip
    print(table(headers, body))
    path = write_results(
        "start",
        {"machine": machine(), "size": size, "backend": args.backend, "smriti": args.smriti,
         "rows": rows},
        args.out,
    )  # fmt: skip
    print(f"results: {path}")


if __name__ == "__main__":
    main()
