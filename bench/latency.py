"""End-to-end store and recall latency with the local model: embedding included.

A store of ``--size`` synthetic memories (bench/corpus.py, embedded by the local MiniLM
model, bulk-imported into Kùzu) is copied once per ``--runs`` round; each round opens an
Engine on its copy in this process (no owner process), answers ``--warmup`` recalls,
then times ``--queries`` recalls (``mode=recall, limit=10``; the query is embedded each
time) and ``--stores`` stores of new memories (content and new cue names embedded in one
batch, associations searched, written to disk). The same code path an MCP tool call
takes, minus the JSON-RPC framing.

Run it with two checkouts' interpreters on one store to compare code versions side by
side (``--store DIR`` keeps the imported store between invocations)::

    uv run python bench/latency.py --size 10k --store /tmp/lat-10k
    /other/checkout/.venv/bin/python bench/latency.py --size 10k --store /tmp/lat-10k

Results: a line per round on stdout, JSON in bench/results/latency-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
from common import (  # noqa: E402
    configure_logging,
    latency_summary,
    machine,
    model_dir,
    plugin_manager,
    write_results,
)


def size_arg(raw: str) -> int:
    """``10k`` / ``100k`` / ``2500``."""
    raw = raw.strip().lower()
    return int(float(raw[:-1]) * 1000) if raw.endswith("k") else int(raw)


def settings(root: str, model: Path) -> Any:
    """Zero-configuration settings on Kùzu under ``root`` with the local model."""
    from smriti.config import Settings

    return Settings.from_env(
        {
            "ACCESSING_USER": "bench",
            "STORAGE_LOCATION": root,
            "DB_TYPE": "kuzu",
            "SMRITI_EMBEDDER": "local",
            "SMRITI_LOCAL_MODEL": str(model),
            "SMRITI_OWNER": "off",
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
        }
    )


def build(root: Path, size: int, model: Path) -> None:
    """Bulk-import ``size`` memories embedded by the local model into ``root``."""
    from engine import bulk_import

    from smriti.engine.core import Engine

    engine = Engine.from_settings(settings(str(root), model), plugin_manager()).open()
    try:
        records = corpus.records(corpus.memories(size), engine.embedder)
        bulk_import(engine.backend, records)
    finally:
        engine.close()


def one_round(store: Path, size: int, model: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Open a copy of ``store``; time recalls, then stores."""
    from smriti.engine.core import Engine

    with tempfile.TemporaryDirectory(prefix="smriti-latency-") as tmp:
        root = Path(tmp) / "store"
        shutil.copytree(store, root)
        engine = Engine.from_settings(settings(str(root), model), plugin_manager()).open()
        try:
            queries = corpus.queries(args.warmup + args.queries, seed=int(time.time()))
            for q in queries[: args.warmup]:
                engine.recall(q, limit=10)
            recall_s = []
            for q in queries[args.warmup :]:
                started = time.perf_counter()
                engine.recall(q, limit=10)
                recall_s.append(time.perf_counter() - started)
            fresh = corpus.memories(size + args.stores, seed=int(time.time()) % 1000)[size:]
            store_s = []
            for memory in fresh:
                started = time.perf_counter()
                engine.store(memory.text)
                store_s.append(time.perf_counter() - started)
        finally:
            engine.close()
    return {
        "recall": latency_summary(recall_s),
        "store": latency_summary(store_s),
        "model": engine.embedder.model_id,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Build (or reuse) the store, then run the timed rounds."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", type=size_arg, default=10_000)
    p.add_argument("--store", type=Path, default=None, help="keep the imported store here")
    p.add_argument(
        "--model-dir", default=None, help="model directory (default: the default model's, fetched)"
    )
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--stores", type=int, default=200)
    p.add_argument("--label", default="")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    configure_logging("warning")
    model = model_dir(args.model_dir)
    with tempfile.TemporaryDirectory(prefix="smriti-latency-build-") as tmp:
        store = args.store or Path(tmp) / "store"
        if not store.exists():
            build(store, args.size, model)
        rounds = []
        model_id = ""
        for n in range(args.runs):
            row = one_round(store, args.size, model, args)
            model_id = row.pop("model")
            rounds.append(row)
            print(
                f"{args.label} round {n + 1}: recall p50/p95 {row['recall']['p50_ms']}"
                f" / {row['recall']['p95_ms']} ms, store p50/p95 {row['store']['p50_ms']}"
                f" / {row['store']['p95_ms']} ms",
                flush=True,
            )
    payload = {"machine": machine(), "args": vars(args), "model": model_id, "rounds": rounds}
    print(f"results: {write_results('latency', payload, args.out)}")


if __name__ == "__main__":
    main()
