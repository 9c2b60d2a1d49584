"""The working set's vector cache (smriti.backend.vector_cache): its int8 pre-scan returns exactly
what the float32 scan returns."""

from __future__ import annotations

import numpy as np
import pytest

from smriti.backend import VectorCache, cosine_top_k
from smriti.backend import vector_cache as vectors


def reference(vc: VectorCache, query: np.ndarray, k: int, label: int | None) -> list[float]:
    """Scores of the plain float32 scan over the cache's current rows."""
    n = len(vc)
    matrix = vc._rows.array(n)  # type: ignore[union-attr]
    mask = None if label is None else vc._labels[:n] == label
    return [s for _, s in cosine_top_k(matrix, query, k, mask)]


def corpus(kind: str, n: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "gaussian":
        return rng.standard_normal((n, dims))
    if kind == "skewed":  # non-negative, heavy-tailed: many near-duplicate directions
        return np.abs(rng.standard_normal((n, dims))) ** 3
    if kind == "binary":  # many exact ties
        return rng.integers(0, 2, (n, dims)).astype(float) + 1e-3
    spiky = rng.standard_normal((n, dims))
    spiky[:, :3] *= 50  # a few dominant coordinates: coarse int8 scales
    return spiky


@pytest.mark.parametrize("kind", ["gaussian", "skewed", "binary", "spiky"])
@pytest.mark.parametrize("dims", [8, 384])
def test_quantised_search_is_exact(kind: str, dims: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors, "QUANTISED_MIN_ROWS", 1)
    rng = np.random.default_rng(dims + len(kind))
    n = 3000
    rows = corpus(kind, n, dims, rng)
    labels = rng.integers(0, 3, n)
    vc = VectorCache()
    vc.put_many((str(i), rows[i], int(labels[i])) for i in range(n))
    # Deletions move the last row into holes; replacements re-quantise one row.
    gone = [str(i) for i in rng.choice(n, n // 10, replace=False)]
    vc.remove(gone)
    vc.put_many((key, rng.standard_normal(dims), 1) for key in gone[: len(gone) // 2])
    vc.put_many((str(i), rows[i] * -1, 2) for i in range(5))
    assert vc._quant is not None, "simsimd is a dependency of the framework"
    for trial in range(30):
        query = rows[rng.integers(0, n)] + 0.1 * rng.standard_normal(dims)
        k = [1, 5, 10, 50][trial % 4]
        label = None if trial % 3 else int(rng.integers(0, 3))
        got = [s for _, s in vc.search(query, k, label)]
        # Same rows, so the same scores up to float32 summation order.
        want = reference(vc, query, k, label)
        assert got == pytest.approx(want, abs=1e-5)
        # A floor between two of the top scores (or above all of them) cuts the list.
        floor = want[len(want) // 2] + 1e-4 if trial % 5 else want[0] + 0.01
        above = [s for _, s in vc.search(query, k, label, min_score=floor)]
        assert above == pytest.approx([s for s in want if s >= floor], abs=1e-5)


def test_quantised_search_edge_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors, "QUANTISED_MIN_ROWS", 1)
    vc = VectorCache()
    vc.put_many([("a", np.array([1.0, 0.0]), 0), ("b", np.array([0.0, 1.0]), 1)])
    assert vc.search(np.zeros(2), 3) == []
    assert [k for k, _ in vc.search(np.array([1.0, 0.1]), 5)] == ["a", "b"]
    assert vc.search(np.array([1.0, 0.0]), 5, label=1) == [("b", 0.0)]
    assert vc.search(np.array([1.0, 0.0]), 5, label=7) == []
    vc.remove(["a", "b"])
    assert vc.search(np.array([1.0, 0.0]), 5) == []
    vc.put_many([("c", np.array([3.0, 4.0]), 0)])
    [(key, score)] = vc.search(np.array([3.0, 4.0]), 1)
    assert key == "c" and score == pytest.approx(1.0)


def test_bulk_and_single_puts_store_the_same_rows() -> None:
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((500, 16)) * rng.uniform(0.1, 10, (500, 1))
    rows[3] = 0.0  # a zero vector stays zero and never matches
    bulk, single = VectorCache(), VectorCache()
    bulk.put_many((str(i), rows[i], i % 3) for i in range(500))
    for i in range(500):
        single.put_many([(str(i), rows[i], i % 3)])
    bulk.put_many([("7", rows[8], 1), ("new", rows[9], 2), ("new", rows[10], 0)])  # last wins
    single.put_many([("7", rows[8], 1), ("new", rows[10], 0)])
    assert len(bulk) == len(single) == 501
    for key in ["0", "3", "7", "new", "499"]:
        assert np.allclose(bulk.vector(key), single.vector(key), atol=1e-5)
    query = rows[10]
    for label in (None, 0, 2):
        got = bulk.search(query, 5, label)
        want = single.search(query, 5, label)
        assert [k for k, _ in got] == [k for k, _ in want]
        final = {str(i): rows[i] for i in range(500)} | {"7": rows[8], "new": rows[10]}
        for key, score in got:
            v = final[key]
            cosine = float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query)))
            assert score == pytest.approx(cosine, abs=1e-5)
