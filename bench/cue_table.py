"""Kùzu add_memory latency as the Cue table grows: cues linked by a join or by key.

Usage (from the repository root, Python 3.12)::

    OPENBLAS_NUM_THREADS=1 uv run python bench/cue_table.py [--cues 5000,50000,200000]

A real store's cue vocabulary keeps growing (names, keywords, tags), while the engine
benchmark's generated corpus reuses about 5,700 cues at 100k memories. This script
fills a Kùzu store with 2,000 memories and then cues up to each size, and times
``add_memory`` of memories with 7 cues (4 existing, 3 new) both ways the backend can
link them: ``UNWIND ... MATCH`` (a hash join over the whole Cue table) and one primary-
key pattern per cue. The two are timed alternately in one process, as well as the
backend's own choice (``link_by_key``). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

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

from smriti.config import Settings  # noqa: E402
from smriti.engine import Engine  # noqa: E402
from smriti.model import Cue  # noqa: E402
from smriti.testing import GraphBuilder  # noqa: E402

BASE_MEMORIES = 2000
STORES = 60  # per way, per size
build = GraphBuilder(384)


def cues(count: int, prefix: str) -> list[Cue]:
    return [build.cue(f"{prefix} {i}") for i in range(count)]


def measure(backend: Any, rng: np.random.Generator, pool: list[Cue], start: int) -> dict:
    """Alternate the three ways of linking, ``STORES`` stores each."""
    from smriti_embedded_graph import rows

    choose = rows.link_by_key
    ways: dict[str, Callable[[int, int], bool]] = {
        "join": lambda links, size: False,
        "by key": lambda links, size: True,
        "chosen": choose,
    }
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for i in range(STORES * len(ways)):
            name = list(ways)[i % len(ways)]
            rows.link_by_key = ways[name]  # type: ignore[assignment]
            old = [pool[j] for j in rng.choice(len(pool), 4, replace=False)]
            memory_cues = old + cues(3, f"new {start + i}")
            e = build.engram(BASE_MEMORIES + start + i)
            seconds[name].append(timed(lambda e=e, c=memory_cues: backend.add_memory(e, c, []))[1])
    finally:
        rows.link_by_key = choose  # type: ignore[assignment]
    return {name: latency_summary(s) for name, s in seconds.items()}


def run(sizes: list[int]) -> list[dict]:
    rng = np.random.default_rng(11)
    rows = []
    with tempfile.TemporaryDirectory(prefix="smriti-cues-") as tmp:
        env = {
            "ACCESSING_USER": "bench",
            "STORAGE_LOCATION": tmp,
            "DB_TYPE": "kuzu",
            "SMRITI_EMBEDDER": "lexical",
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_TYPE": "none",
        }
        engine = Engine.from_settings(Settings.from_env(env), plugin_manager()).open()
        try:
            backend = engine.backend
            backend.import_records([build.engram(i) for i in range(BASE_MEMORIES)], [], [], [], [])
            pool: list[Cue] = []
            stored = 0
            for size in sorted(sizes):
                while len(pool) < size:
                    batch = cues(min(20_000, size - len(pool)), f"cue {len(pool)}")
                    backend.import_records([], batch, [], [], [])
                    pool += batch
                row = {"cues": backend.counts()["cues"], **measure(backend, rng, pool, stored)}
                stored += STORES * 3
                rows.append(row)
        finally:
            engine.close()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cues", default="5000,50000,200000", help="Cue table sizes")
    p.add_argument("--json", type=Path, help="write results here")
    args = p.parse_args()
    configure_logging()
    rows = run([int(s) for s in args.cues.split(",")])
    headers = ["cues", "join p50", "join p95", "by key p50", "by key p95", "chosen p50"]
    print(
        table(
            headers,
            [
                [
                    r["cues"],
                    r["join"]["p50_ms"],
                    r["join"]["p95_ms"],
                    r["by key"]["p50_ms"],
                    r["by key"]["p95_ms"],
                    r["chosen"]["p50_ms"],
                ]
                for r in rows
            ],
        )
    )
    print("add_memory latency in ms: 7 cues per memory (4 existing, 3 new), no associations.")
    out = write_results("cue-table", {"machine": machine(), "rows": rows}, args.json)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
