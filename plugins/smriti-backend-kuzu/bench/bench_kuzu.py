"""Measure the Kùzu backend: store latency, import throughput, vector and text search.

Usage: uv run python plugins/smriti-backend-kuzu/bench/bench_kuzu.py [N] [DIMS]
Results go to stderr as structlog lines (never stdout).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from smriti_backend_kuzu.backend import KuzuBackend

from smriti.logs import get_logger
from smriti.model import Association, Link
from smriti.testing import GraphBuilder

log = get_logger("bench_kuzu")


def main(n: int = 10_000, dims: int = 384) -> None:
    build = GraphBuilder(dims)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "u" / "memory.kuzu"
        backend = KuzuBackend("u", path)
        backend.open()
        engrams = [build.engram(i) for i in range(n)]
        cues = [build.cue(f"cue{i}") for i in range(n // 5)]
        links = [
            Link(e.id, cues[(i * 7 + j) % len(cues)].id)
            for i, e in enumerate(engrams)
            for j in range(5)
        ]
        assocs = [Association(engrams[i].id, engrams[i - 1].id, 0.8) for i in range(1, n)]
        start = time.perf_counter()
        backend.import_records(engrams, cues, links, assocs, [])
        took = time.perf_counter() - start
        log.info(
            "import_records", memories=n, dims=dims, seconds=round(took, 2), per_s=round(n / took)
        )
        lat = []
        for i in range(200):
            e = build.engram(n + i)
            cs = [
                build.cue(f"new{i}-{j}") if j < 2 else cues[(i + j) % len(cues)] for j in range(5)
            ]
            a = [Association(e.id, engrams[(i * 13) % n].id, 0.75)]
            t = time.perf_counter()
            backend.add_memory(e, cs, a)
            lat.append(time.perf_counter() - t)
        log.info(
            "add_memory",
            p50_ms=round(np.median(lat) * 1000, 2),
            p95_ms=round(np.percentile(lat, 95) * 1000, 2),
        )
        for label, fn in (
            ("vector_search cache", lambda q: backend.vector_search(q, 10)),
            ("vector_search cache filtered", lambda q: backend.vector_search(q, 10, "semantic")),
            ("text_search scan", lambda q: backend.text_search("memory topic3 number", 10)),
        ):
            _time(label, fn, build)
        t = time.perf_counter()
        backend.ensure_indexes(dims, 50)
        log.info("ensure_indexes (fts)", seconds=round(time.perf_counter() - t, 2))
        _time("text_search fts", lambda q: backend.text_search("memory topic3 number", 10), build)
        backend.close()
        t = time.perf_counter()
        backend.open()
        log.info("reopen (cache load)", seconds=round(time.perf_counter() - t, 2))
        backend.close()


def _time(label: str, fn: object, build: GraphBuilder) -> None:
    lat = []
    for i in range(50):
        q = build.vec(777 + i)
        t = time.perf_counter()
        fn(q)  # type: ignore[operator]
        lat.append(time.perf_counter() - t)
    log.info(label, p50_ms=round(np.median(lat) * 1000, 3))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
