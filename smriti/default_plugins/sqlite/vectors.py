"""Exact cosine search over one table's embeddings, held in process and kept in step.

Reading every embedding from SQLite for each search would cost tens of milliseconds at
10k memories; a vector table keeps them as unit float32 rows instead and asks the store,
inside the caller's read transaction, whether anything changed: rows with a ``seq``
above the last one it holds are appended; a higher ``epoch`` (embeddings deleted or
replaced, by this process or another) means a reload. Searches are exact (brute force),
which is fast enough at this scale (TESTING.md: a few milliseconds over 100k x 384).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field

import numpy as np

from smriti.backend import cosine_top_k


@dataclass(slots=True)
class _Block:
    """The rows of one embedding width: ids, type labels and a growable matrix."""

    ids: list[str] = field(default_factory=list)
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    matrix: np.ndarray | None = None

    def append(self, ids: list[str], vectors: np.ndarray, labels: np.ndarray) -> None:
        """Add unit rows (amortised: the matrix grows by doubling)."""
        n, need = len(self.ids), len(self.ids) + len(ids)
        if self.matrix is None or self.matrix.shape[0] < need:
            grown = np.zeros((max(need, 2 * n, 64), vectors.shape[1]), dtype=np.float32)
            grown_labels = np.zeros(grown.shape[0], dtype=np.int32)
            if self.matrix is not None:
                grown[:n], grown_labels[:n] = self.matrix[:n], self.labels[:n]
            self.matrix, self.labels = grown, grown_labels
        self.matrix[n:need] = vectors
        self.labels[n:need] = labels
        self.ids.extend(ids)


class VectorTable:
    """The unit embeddings of ``engram`` or ``cue`` rows, refreshed from the store."""

    def __init__(self, table: str, typed: bool) -> None:
        self.table = table
        #: Whether rows carry a memory type (engrams) for filtered searches.
        self.typed = typed
        self._lock = threading.Lock()
        self._blocks: dict[int, _Block] = {}
        self._labels: dict[str, int] = {}
        self._epoch = -1
        self._top = 0

    def clear(self) -> None:
        """Forget every row (the next refresh reloads)."""
        with self._lock:
            self._reset(-1)

    def _reset(self, epoch: int) -> None:
        self._blocks.clear()
        self._epoch, self._top = epoch, 0

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Catch up with the store as ``conn``'s transaction sees it."""
        epoch = conn.execute("SELECT value FROM epoch WHERE name = ?", (self.table,)).fetchone()[0]
        top = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {self.table}").fetchone()[0]
        with self._lock:
            if epoch < self._epoch or (epoch == self._epoch and top <= self._top):
                return  # current, or this snapshot is older than what is held
            if epoch != self._epoch:
                self._reset(epoch)
            kind = "memory_type" if self.typed else "''"
            rows = conn.execute(
                f"SELECT seq, id, embedding, {kind} FROM {self.table} "
                "WHERE seq > ? AND embedding IS NOT NULL ORDER BY seq",
                (self._top,),
            ).fetchall()
            self._add(rows)
            self._top = max(self._top, int(top))

    def _add(self, rows: list[tuple[int, str, bytes, str]]) -> None:
        by_width: dict[int, list[tuple[int, str, bytes, str]]] = {}
        for row in rows:
            by_width.setdefault(len(row[2]) // 4, []).append(row)
        for dims, group in by_width.items():
            matrix = np.frombuffer(b"".join(r[2] for r in group), dtype="<f4")
            matrix = matrix.reshape(len(group), dims).astype(np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix /= np.where(norms > 0, norms, 1.0)  # zero rows stay zero
            labels = [self._labels.setdefault(r[3], len(self._labels)) for r in group]
            block = self._blocks.setdefault(dims, _Block())
            block.append([r[1] for r in group], matrix, np.asarray(labels, dtype=np.int32))

    def search(
        self, query: np.ndarray, k: int, floor: float = -1.0, memory_type: str | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` (id, cosine) of at least ``floor`` among rows of the query's width
        (and ``memory_type`` when given), best first."""
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            block = self._blocks.get(query.shape[0])
            if block is None or block.matrix is None or k <= 0:
                return []
            n = len(block.ids)
            mask = None
            if memory_type is not None:
                label = self._labels.get(memory_type)
                if label is None:
                    return []
                mask = block.labels[:n] == label
            hits = cosine_top_k(block.matrix[:n], query, k, mask)
            return [(block.ids[i], s) for i, s in hits if s >= floor]

    def nearest(self, queries: np.ndarray, k: int, floor: float) -> dict[str, float]:
        """For each row of ``queries``, its ``k`` nearest rows of at least ``floor``:
        id -> the best cosine any query row gave it."""
        best: dict[str, float] = {}
        for row in np.atleast_2d(np.asarray(queries, dtype=np.float32)):
            for key, score in self.search(row, k, floor):
                if score > best.get(key, -np.inf):
                    best[key] = score
        return best
