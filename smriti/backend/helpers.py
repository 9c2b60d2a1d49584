"""Small helpers backends share: batching, (id, score) joins and exact cosine top-k."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from smriti.model import Engram


def joined(
    hits: Sequence[tuple[str, float]], engrams: Iterable[Engram]
) -> list[tuple[Engram, float]]:
    """(engram, score) for each (id, score) of ``hits`` whose engram is in ``engrams``,
    in the order of ``hits``."""
    by_id = {e.id: e for e in engrams}
    return [(by_id[i], score) for i, score in hits if i in by_id]


def cosine_top_k(
    matrix: np.ndarray, query: np.ndarray, k: int, mask: np.ndarray | None = None
) -> list[tuple[int, float]]:
    """Exact top-``k`` (row index, cosine) of L2-normalised ``matrix`` rows against ``query``.

    A helper for backends that search in process; ``mask`` selects eligible rows.
    """
    if k <= 0 or matrix.shape[0] == 0:
        return []
    norm = float(np.linalg.norm(query))
    if norm == 0.0:
        return []
    return top_k_scores(matrix @ (query.astype(np.float32) / norm), k, mask)


def top_k_scores(
    scores: np.ndarray, k: int, mask: np.ndarray | None = None
) -> list[tuple[int, float]]:
    """The best ``k`` (index, score) of ``scores``, best first; ``mask`` selects the
    eligible ones."""
    if k <= 0 or scores.shape[0] == 0:
        return []
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    k = min(k, scores.shape[0])
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(i), float(scores[i])) for i in top if np.isfinite(scores[i])]


def unit(vector: np.ndarray) -> np.ndarray:
    """The L2-normalised float32 copy of ``vector`` (zero stays zero)."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def batched[T](items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Split an iterable into lists of at most ``size`` items."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
