"""Recall of FalkorDB's HNSW index (as the backend uses it) against exact cosine.

A few thousand clustered vectors (like sentence embeddings: topics plus noise). The
figure is printed; see it with
``uv run pytest plugins/smriti-backend-falkor/tests/test_vector_recall.py -s``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from smriti_backend_falkor.backend import FalkorBackend
from smriti_backend_falkor.search import SeekAnswer, SeekInput, SeekPlan

from smriti.backend import Seek, unit
from smriti.testing import GraphBuilder

N, DIMS, TOPICS, QUERIES, K = 3000, 128, 60, 100, 10


def clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    centers = rng.standard_normal((TOPICS, DIMS))
    points = centers[rng.integers(0, TOPICS, n)] + 1.0 * rng.standard_normal((n, DIMS))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def load(backend: FalkorBackend, vectors: np.ndarray, prefix: str) -> list[str]:
    build = GraphBuilder(DIMS)
    engrams = [build.engram(i, id=f"{prefix}{i:05d}", embedding=v) for i, v in enumerate(vectors)]
    backend.import_records(engrams, [], [], [], [])
    return [e.id for e in engrams]


def recall_at_k(
    backend: FalkorBackend,
    ids: list[str],
    vectors: np.ndarray,
    queries: np.ndarray,
    search: Callable[[np.ndarray], list[str]],
) -> float:
    hits = 0
    for q in queries:
        exact = {ids[i] for i in np.argsort(-(vectors @ unit(q)), kind="stable")[:K]}
        hits += len(exact & set(search(q)))
    return hits / (K * len(queries))


RAW_INDEX_QUERY = """
CALL db.idx.vector.queryNodes('Engram', 'embedding', $fetch, vecf32($query))
YIELD node, score
WHERE node.user = $user
RETURN node.id
"""


def raw_index(backend: FalkorBackend, q: np.ndarray) -> list[str]:
    """The index alone: k=10 candidates, no over-fetch (what a naive backend would do)."""
    rows = backend._read(RAW_INDEX_QUERY, query=[float(x) for x in unit(q)], fetch=K)
    return [r[0] for r in rows]


@pytest.mark.parametrize("isolation", ["graph", "tenant"])
def test_index_recall_against_exact_cosine(
    make_backend: Callable[..., FalkorBackend], isolation: str
) -> None:
    rng = np.random.default_rng(7)
    vectors = clustered(rng, N)
    alice = make_backend("alice", isolation)
    ids = load(alice, vectors, "a")
    if isolation == "tenant":  # another user's equally many vectors share the index
        load(make_backend("bob", isolation), clustered(np.random.default_rng(8), N), "b")
    assert alice.ensure_indexes(DIMS, 50), "no index was created"
    alice.wait_for_indexes()
    queries = vectors[rng.integers(0, N, QUERIES)] + 0.3 * rng.standard_normal((QUERIES, DIMS))
    assert alice._indexes is not None and alice._indexes.vector_ready("Engram", DIMS)

    run_seek = alice._run_seek  # prove the index path answers, not the exact fallback
    used_index = []

    def spy(plan: SeekPlan, ask: SeekInput) -> SeekAnswer:
        used_index.append(plan.vector == "index")
        return run_seek(plan, ask)

    alice._run_seek = spy  # type: ignore[method-assign]
    backend_recall = recall_at_k(
        alice, ids, vectors, queries, lambda q: [i for i, _ in alice.seek(Seek(K, q)).vector]
    )
    raw = recall_at_k(alice, ids, vectors, queries, lambda q: raw_index(alice, q))
    print(
        f"\nFalkorDB HNSW recall@{K} vs exact cosine ({isolation} mode, {N} x {DIMS}d, "
        f"{QUERIES} queries): backend {backend_recall:.3f}, raw index k={K} {raw:.3f}"
        + (
            f" (k=10 then the user filter; bob's {N} vectors share the index)"
            if isolation == "tenant"
            else ""
        )
    )
    assert all(used_index), "the search fell back to the exact scan"
    assert backend_recall >= 0.95
