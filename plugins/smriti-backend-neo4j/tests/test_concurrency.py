"""Concurrent writers: merged cues stay unique and co-occurrence counts stay exact.

Neo4j serialises the conflicting MERGEs through the uniqueness constraints and node
locks; deadlocks surface as transient errors that the managed transaction retries.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from smriti_backend_neo4j.backend import Neo4jBackend

from smriti.testing import GraphBuilder


def test_parallel_add_memory_with_shared_cues(make_backend: Callable[..., Neo4jBackend]) -> None:
    build = GraphBuilder(8)
    backend = make_backend("alice")
    shared = [build.cue(name) for name in ("apple", "pear", "plum")]

    def store(i: int) -> None:
        own = build.cue(f"own{i}")
        backend.add_memory(build.engram(i), [*shared, own], [])

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(store, range(30)))

    counts = backend.counts()
    assert counts["engrams"] == 30 and counts["cues"] == 33 and counts["links"] == 120
    strengths = {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}
    assert strengths[(shared[0].id, shared[1].id)] == 30.0
    assert strengths[(shared[2].id, shared[0].id)] == 30.0
    assert strengths[("c-own7", shared[1].id)] == 1.0
    assert len(strengths) == 6 + 30 * 6
