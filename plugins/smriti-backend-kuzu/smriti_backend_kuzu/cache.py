"""In-process vector caches: exact cosine search over a normalised float32 matrix.

The backend process holds Kùzu's file lock, so nobody else can change the store while
it is open: a cache loaded at open and updated after every committed write is
authoritative. Exact search over 100k x 384 takes a few milliseconds, faster than the
HNSW index at that scale (see the README), and it is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from smriti.errors import BackendError
from smriti.storage import cosine_top_k, unit


class VectorCache:
    """Row-per-id matrix of unit vectors with a small integer label per row.

    Rows are kept in a growing buffer; deletion moves the last row into the hole, so
    updates cost O(dims) and never copy the matrix.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: list[str] = []
        self._index: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._labels = np.zeros(0, dtype=np.int16)
        self._norms = np.zeros(0, dtype=np.float32)
        self.dims: int | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def check_dims(self, vector: np.ndarray) -> None:
        """Raise BackendError when ``vector`` does not match the stored width."""
        if self.dims is not None and vector.shape[0] != self.dims:
            raise BackendError(
                f"embedding has {vector.shape[0]} dimensions but this store holds "
                f"{self.dims}-dimensional vectors; re-embed or use a new STORAGE_LOCATION"
            )

    def put_many(self, items: Iterable[tuple[str, np.ndarray, int]]) -> None:
        """Insert or replace rows (id, vector, label)."""
        with self._lock:
            for key, vector, label in items:
                self._put(key, vector, label)

    def _put(self, key: str, vector: np.ndarray, label: int) -> None:
        raw = np.asarray(vector, dtype=np.float32).reshape(-1)
        v = unit(raw)
        if self.dims is None:
            self.dims = v.shape[0]
            self._matrix = np.zeros((64, self.dims), dtype=np.float32)
            self._labels = np.zeros(64, dtype=np.int16)
            self._norms = np.zeros(64, dtype=np.float32)
        self.check_dims(v)
        row = self._index.get(key)
        if row is None:
            row = len(self._ids)
            if row >= self._matrix.shape[0]:
                self._grow()
            self._ids.append(key)
            self._index[key] = row
        self._matrix[row] = v
        self._labels[row] = label
        self._norms[row] = float(np.linalg.norm(raw))

    def vector(self, key: str) -> np.ndarray | None:
        """The stored (not normalised) vector of ``key``, within float32 rounding."""
        row = self._index.get(key)
        if row is None:
            return None
        with self._lock:
            row = self._index.get(key)
            return None if row is None else self._matrix[row] * self._norms[row]

    def _grow(self) -> None:
        cap = max(64, self._matrix.shape[0] * 2)
        matrix = np.zeros((cap, self._matrix.shape[1]), dtype=np.float32)
        matrix[: self._matrix.shape[0]] = self._matrix
        labels = np.zeros(cap, dtype=np.int16)
        labels[: self._labels.shape[0]] = self._labels
        norms = np.zeros(cap, dtype=np.float32)
        norms[: self._norms.shape[0]] = self._norms
        self._matrix, self._labels, self._norms = matrix, labels, norms

    def remove(self, keys: Iterable[str]) -> None:
        """Drop rows; unknown keys are ignored."""
        with self._lock:
            for key in keys:
                row = self._index.pop(key, None)
                if row is None:
                    continue
                last = len(self._ids) - 1
                if row != last:
                    moved = self._ids[last]
                    self._ids[row] = moved
                    self._index[moved] = row
                    self._matrix[row] = self._matrix[last]
                    self._labels[row] = self._labels[last]
                    self._norms[row] = self._norms[last]
                self._ids.pop()

    def set_label(self, key: str, label: int) -> None:
        """Change the label of one row (no-op for unknown keys)."""
        with self._lock:
            row = self._index.get(key)
            if row is not None:
                self._labels[row] = label

    def search(
        self, query: np.ndarray, k: int, label: int | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` (id, cosine), best first; ``label`` restricts the rows searched."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            n = len(self._ids)
            if n == 0 or self.dims is None:
                return []
            self.check_dims(q)
            matrix = self._matrix[:n]
            mask = None if label is None else self._labels[:n] == label
            top = cosine_top_k(matrix, q, k, mask)
            return [(self._ids[i], score) for i, score in top]

    def clear(self) -> None:
        """Forget every row (used when the store is closed)."""
        with self._lock:
            self.__init__()  # type: ignore[misc]
