"""Store / recall latency of the smriti Engine on FalkorDB with N memories already stored.

Starts an embedded FalkorDB (falkordblite) on 127.0.0.1, bulk-loads N memories (texts
from a small vocabulary, embedded by the engine's embedder, one cue per memory), builds
the indexes, then times Engine.store and Engine.recall. Results go to stderr as JSON.

    uv run python plugins/smriti-backend-falkor/bench/latency.py --memories 10000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from smriti.config import Settings
from smriti.engine import Engine
from smriti.model import Cue, Engram, Link, utcnow
from smriti.plugins import create_plugin_manager

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import FalkorServer  # noqa: E402

WORDS = [
    "apple",
    "zebra",
    "paris",
    "gravity",
    "music",
    "coffee",
    "river",
    "python",
    "garden",
    "meeting",
    "doctor",
    "invoice",
    "flight",
    "hotel",
    "birthday",
    "guitar",
    "recipe",
    "running",
    "budget",
    "report",
    "kubernetes",
    "database",
    "holiday",
    "museum",
    "train",
    "weather",
    "novel",
    "painting",
    "football",
    "chess",
]


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = np.array(samples) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--isolation", default="tenant", choices=["tenant", "graph"])
    args = parser.parse_args()
    server = FalkorServer(Path(tempfile.mkdtemp())).start()
    import smriti_backend_falkor.plugin as falkor_plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(falkor_plugin, name="smriti-backend-falkor")
    env = {
        "DB_TYPE": "falkordb",
        "FALKOR_ADDR": server.addr,
        "ACCESSING_USER": "bench",
        "FALKOR_ISOLATION": args.isolation,
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
        "STORAGE_LOCATION": tempfile.mkdtemp(),
    }
    engine = Engine.from_settings(Settings.from_env(env), pm=pm).open()
    rng = random.Random(1)
    try:
        started = time.perf_counter()
        texts = [text(rng) for _ in range(args.memories)]
        vectors = engine.embed(texts)
        now = utcnow()
        cues = [
            Cue(id=f"c-{w}", name=w, cue_type="keyword", embedding=v)
            for w, v in zip(WORDS, engine.embed(WORDS), strict=True)
        ]
        engrams = [
            Engram(
                id=f"m{i:06d}",
                content=t,
                summary=t[:40],
                memory_type="episodic",
                importance=0.5,
                created_at=now,
                last_accessed_at=now,
                embedding=v,
            )
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
        ]
        links = [Link(e.id, f"c-{e.content.split()[0]}") for e in engrams]
        engine.backend.import_records(engrams, cues, links, [], [])
        load_s = time.perf_counter() - started
        t = time.perf_counter()
        engine.backend.ensure_indexes(engine.embedder.dims, 50)
        engine.backend.wait_for_indexes(600)  # type: ignore[attr-defined]
        index_s = time.perf_counter() - t
        stores, recalls, searches = [], [], []
        for _ in range(args.ops):
            t = time.perf_counter()
            engine.store(text(rng))
            stores.append(time.perf_counter() - t)
        for _ in range(args.ops):
            query = " ".join(rng.choice(WORDS) for _ in range(3))
            t = time.perf_counter()
            engine.recall(query, limit=5)
            recalls.append(time.perf_counter() - t)
            t = time.perf_counter()
            engine.recall(query, limit=5, mode="search")
            searches.append(time.perf_counter() - t)
        report = {
            "memories": args.memories,
            "isolation": args.isolation,
            "embedder": engine.embedder.name,
            "dims": engine.embedder.dims,
            "bulk_load_s": round(load_s, 1),
            "index_build_s": round(index_s, 1),
            "store": percentiles(stores),
            "recall": percentiles(recalls),
            "search": percentiles(searches),
        }
        sys.stderr.write(json.dumps(report) + "\n")
    finally:
        engine.close()
        server.stop()


if __name__ == "__main__":
    main()
