"""In-process vector caches: exact cosine search over a normalised float32 matrix.

A building block for backends (``smriti.backend.VectorCache``) and the working set. A
backend that is its store's only writer (an embedded database holding its file lock)
can keep one: loaded at open and updated after every committed write, it is
authoritative. Exact search over 100k x 384 takes a few milliseconds, faster than an
HNSW index at that scale, and it is exact.

A float32 scan of 100k x 384 is bound by memory bandwidth (~12 ms here). Large caches
therefore also keep an int8 copy of every row and scan that (a quarter of the bytes)
with simsimd's SIMD kernels; the int8 scores come with a per-row error bound, and every
row whose bound reaches the k-th best exact score is re-scored in float32, so the
result is still the exact top k (``QuantisedRows.search``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from smriti.backend.helpers import top_k_scores, unit
from smriti.backend.rows import UnitRows
from smriti.errors import BackendError

# simsimd's threads come from OpenMP, whose default is to spin for a while after each
# parallel region: on this 2-core machine that doubled the CPU time of a 100k scan (6.3
# ms against 4.5 ms, wall time unchanged) and took it from the Kùzu write running
# beside a store's search. Sleeping threads cost nothing measurable here. libgomp reads
# the setting when it loads, with simsimd, so it is set first; a user's choice wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:  # an optional accelerator: without it every search is the float32 scan
    import simsimd
except ImportError:  # pragma: no cover - simsimd is a dependency of smriti-core
    simsimd = None

#: Caches with at least this many rows search through the int8 copy first.
QUANTISED_MIN_ROWS = 4_096
#: When more than this share of rows needs re-scoring, one float32 scan is cheaper.
RESCORE_MAX_SHARE = 0.25
#: simsimd threads for the int8 scan: it is compute-bound (100k x 384 on this 2-core
#: machine: 3.4 ms on one thread, 1.8 ms on two).
SCAN_THREADS = min(os.cpu_count() or 1, 8)


def _taken(values: np.ndarray, capacity: int, dtype: Any) -> np.ndarray:
    """``values`` with ``capacity`` rows: the array itself when it already has them (and
    is a writable array of ``dtype``), else a copy padded with zeros."""
    if (
        values.shape[0] == capacity
        and values.dtype == dtype
        and values.flags.writeable
        and values.flags.c_contiguous
        and not isinstance(values, np.memmap)
    ):
        return values
    out = np.zeros((capacity, *values.shape[1:]), dtype=dtype)
    out[: values.shape[0]] = values
    return out


def scan_top_k(
    rows: UnitRows, n: int, query: np.ndarray, k: int, mask: np.ndarray | None
) -> list[tuple[int, float]]:
    """``smriti.backend.cosine_top_k`` over the first ``n`` of ``rows`` (read a block at a
    time when they are on file)."""
    if k <= 0 or n == 0:
        return []
    norm = float(np.linalg.norm(query))
    if norm == 0.0:
        return []
    return top_k_scores(rows.dot(query.astype(np.float32) / norm, n), k, mask)


class QuantisedRows:
    """An int8 copy of a unit-row matrix with per-row scales, for bounded search.

    Row ``i`` is ``scale[i] * codes[i]`` within ``scale[i] / 2`` per coordinate. For a
    query quantised the same way, the int8 dot product differs from the exact one by at
    most ``scale[i]/2 * |q|_1 + q_scale/2 * |m_i|_1 + dims * scale[i] * q_scale / 4``.

    The codes are kept offset by 128 as uint8: simsimd's uint8 dot product is 20-40%
    faster than its int8 one on AVX2 (100k x 384: 3.7 vs 4.7 ms on one thread), and
    ``sum((q+128)(c+128)) - 128*sum(c) - 128*sum(q) - dims*128**2`` is the int8 dot
    product exactly (integers below 2**25, computed in float64).
    """

    def __init__(self, capacity: int, dims: int) -> None:
        self.codes = np.zeros((capacity, dims), dtype=np.uint8)
        #: ``128 * sum(int8 codes of row i) + dims * 128**2``: the row's part of the offset.
        self.bias = np.zeros(capacity, dtype=np.float64)
        self.scale = np.zeros(capacity, dtype=np.float32)
        self.l1 = np.zeros(capacity, dtype=np.float32)

    @staticmethod
    def quantise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(int8 codes, scales) of float32 rows (2-D)."""
        peak = np.abs(rows).max(axis=1)
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        codes = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
        return codes, scale

    @staticmethod
    def offset(codes: np.ndarray) -> np.ndarray:
        """int8 codes as uint8, offset by 128."""
        return codes.view(np.uint8) ^ np.uint8(0x80)

    def set_rows(self, start: int, rows: np.ndarray) -> None:
        """Quantise ``rows`` into positions ``start..``."""
        codes, scale = self.quantise(rows)
        end = start + rows.shape[0]
        self.codes[start:end], self.scale[start:end] = self.offset(codes), scale
        dims = codes.shape[1]
        self.bias[start:end] = 128.0 * codes.sum(axis=1, dtype=np.int64) + dims * 16384.0
        self.l1[start:end] = np.abs(rows).sum(axis=1)

    def move(self, src: int, dst: int) -> None:
        """Copy row ``src`` to ``dst`` (deletion fills the hole with the last row)."""
        for column in (self.codes, self.bias, self.scale, self.l1):
            column[dst] = column[src]

    def grown(self, capacity: int) -> QuantisedRows:
        """A copy with room for ``capacity`` rows."""
        out = QuantisedRows(capacity, self.codes.shape[1])
        n = self.codes.shape[0]
        for column in ("codes", "bias", "scale", "l1"):
            getattr(out, column)[:n] = getattr(self, column)
        return out

    def search(
        self,
        rows: UnitRows,
        n: int,
        query: np.ndarray,
        k: int,
        mask: np.ndarray | None,
        min_score: float | None = None,
    ) -> list[tuple[int, float]]:
        """Exact top-``k`` (row, cosine) of the first ``n`` of ``rows``; query unit.

        With ``min_score``, only rows scoring at least that are returned, and the bound
        starts from it rather than from the k-th best int8 score (no partition of all
        the scores: a store's association search wants only close neighbours).
        """
        dims = rows.dims
        q_codes, q_scale = self.quantise(query[None, :])
        qs = float(q_scale[0])
        scan = simsimd.cdist(
            self.offset(q_codes), self.codes[:n], metric="dot", threads=SCAN_THREADS
        )
        dots = np.asarray(scan)[0]
        dots -= self.bias[:n]
        dots -= 128.0 * float(q_codes.sum(dtype=np.int64))
        # Work in units of qs (a positive constant): ``scaled * qs`` is the int8 score.
        scaled = dots.astype(np.float32)
        scale, l1 = self.scale[:n], self.l1[:n]
        scaled *= scale
        if mask is not None:
            scaled[~mask] = -np.inf
        k = min(k, n)
        if min_score is None:
            first = np.argpartition(scaled, n - k)[n - k :]
            first = first[np.isfinite(scaled[first])]
            if first.size == 0:
                return []
            threshold = float((rows.take(first) @ query).min())
        else:
            threshold = float(min_score)
        # A row may beat the threshold only if its int8 score plus its error bound does;
        # rows whose score is below the threshold minus the largest bound are skipped
        # without computing their own bound.
        per_scale = 0.5 * float(np.abs(query).sum()) + dims * qs / 4
        per_l1 = 0.5 * qs
        slack = 1e-4  # covers float32 rounding of both dot products
        widest = float(scale.max()) * per_scale + per_l1 * float(l1.max())
        near = np.flatnonzero(scaled >= (threshold - widest - slack) / qs)
        upper = scaled[near] * qs + scale[near] * per_scale + per_l1 * l1[near] + slack
        check = near[upper >= threshold]
        if check.size > RESCORE_MAX_SHARE * n:
            top = scan_top_k(rows, n, query, k, mask)
            return top if min_score is None else [(i, s) for i, s in top if s >= min_score]
        exact = rows.take(check) @ query
        if min_score is not None:
            keep = exact >= min_score
            check, exact = check[keep], exact[keep]
        k = min(k, check.size)
        if k == 0:
            return []
        top = np.argpartition(-exact, k - 1)[:k]
        top = top[np.lexsort((check[top], -exact[top]))]
        return [(int(check[i]), float(exact[i])) for i in top]


class VectorCache:
    """Row-per-id matrix of unit vectors with a small integer label per row.

    Rows are kept in a growing buffer (``capacity`` rows at first, then 1.5x when full);
    deletion moves the last row into the hole, so updates cost O(dims) and never copy
    the matrix.
    """

    def __init__(self, capacity: int = 64) -> None:
        self._capacity = max(64, int(capacity))
        self._lock = threading.Lock()
        self._ids: list[str] = []
        self._index: dict[str, int] = {}
        self._rows: UnitRows | None = None
        self._labels = np.zeros(0, dtype=np.int16)
        self._norms = np.zeros(0, dtype=np.float32)
        self._quant: QuantisedRows | None = None
        #: Rows ``[0, _quantised)`` have current int8 codes.
        self._quantised = 0
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
        """Insert or replace rows (id, vector, label); new keys in bulk."""
        with self._lock:
            fresh: dict[str, tuple[np.ndarray, int]] = {}
            for key, vector, label in items:
                if self.dims is None or key in self._index:
                    self._put(key, vector, label)
                else:
                    fresh[key] = (vector, label)  # the last one per key wins
            if fresh:
                self._append(fresh)
            self._quantise_new()

    def _append(self, rows: dict[str, tuple[np.ndarray, int]]) -> None:
        """Add rows for keys not in the cache: normalised and copied as one block."""
        raw = np.stack([np.asarray(v, dtype=np.float32).reshape(-1) for v, _ in rows.values()])
        if raw.shape[1] != self.dims:
            self.check_dims(raw[0])
        norms = np.linalg.norm(raw, axis=1)
        units = raw / np.where(norms > 0, norms, 1.0)[:, None]
        start = len(self._ids)
        while start + len(rows) > self._labels.shape[0]:
            self._grow()
        end = start + len(rows)
        self._rows.set(start, units)  # type: ignore[union-attr]
        self._norms[start:end] = norms
        self._labels[start:end] = [label for _, label in rows.values()]
        for offset, key in enumerate(rows):
            self._index[key] = start + offset
        self._ids.extend(rows)

    def _quantise_new(self) -> None:
        """Bring the int8 copy up to date (one vectorised step for all new rows)."""
        n = len(self._ids)
        if self._quant is not None and self._quantised < n:
            self._quant.set_rows(self._quantised, self._rows.range(self._quantised, n))  # type: ignore[union-attr]
            self._quantised = n

    def _put(self, key: str, vector: np.ndarray, label: int) -> None:
        raw = np.asarray(vector, dtype=np.float32).reshape(-1)
        v = unit(raw)
        if self.dims is None:
            self.dims = v.shape[0]
            cap = self._capacity
            self._rows = UnitRows(self.dims, cap)
            self._labels = np.zeros(cap, dtype=np.int16)
            self._norms = np.zeros(cap, dtype=np.float32)
            if simsimd is not None:
                self._quant = QuantisedRows(cap, self.dims)
        self.check_dims(v)
        row = self._index.get(key)
        if row is None:
            row = len(self._ids)
            if row >= self._labels.shape[0]:
                self._grow()
            self._ids.append(key)
            self._index[key] = row
        self._rows.set(row, v[None, :])  # type: ignore[union-attr]
        self._labels[row] = label
        self._norms[row] = float(np.linalg.norm(raw))
        if self._quant is not None and row < self._quantised:
            self._quant.set_rows(row, v[None, :])  # a replaced row

    def vector(self, key: str) -> np.ndarray | None:
        """The stored (not normalised) vector of ``key``, within float32 rounding."""
        row = self._index.get(key)
        if row is None:
            return None
        with self._lock:
            row = self._index.get(key)
            return None if row is None else self._rows.row(row) * self._norms[row]  # type: ignore[union-attr]

    def _grow(self) -> None:
        cap = max(64, self._labels.shape[0] * 3 // 2)
        labels = np.zeros(cap, dtype=np.int16)
        labels[: self._labels.shape[0]] = self._labels
        norms = np.zeros(cap, dtype=np.float32)
        norms[: self._norms.shape[0]] = self._norms
        self._labels, self._norms = labels, norms
        if self._quant is not None:
            self._quant = self._quant.grown(cap)

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
                    self._rows.move(last, row)  # type: ignore[union-attr]
                    self._labels[row] = self._labels[last]
                    self._norms[row] = self._norms[last]
                    if self._quant is not None:
                        if last < self._quantised:
                            self._quant.move(last, row)
                        else:
                            self._quantised = min(self._quantised, row)
                self._quantised = min(self._quantised, len(self._ids) - 1)
                self._ids.pop()

    def set_label(self, key: str, label: int) -> None:
        """Change the label of one row (no-op for unknown keys)."""
        with self._lock:
            row = self._index.get(key)
            if row is not None:
                self._labels[row] = label

    def search(
        self,
        query: np.ndarray,
        k: int,
        label: int | None = None,
        min_score: float | None = None,
    ) -> list[tuple[str, float]]:
        """Top-``k`` (id, cosine), best first; ``label`` restricts the rows searched and
        ``min_score`` drops rows scoring less."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            n = len(self._ids)
            if n == 0 or self.dims is None:
                return []
            self.check_dims(q)
            rows = self._rows
            assert rows is not None
            mask = None if label is None else self._labels[:n] == label
            if self._quant is not None and n >= QUANTISED_MIN_ROWS and k > 0:
                self._quantise_new()
                top = []
                if q.any():
                    top = self._quant.search(rows, n, unit(q), k, mask, min_score)
            else:
                top = scan_top_k(rows, n, q, k, mask)
                if min_score is not None:
                    top = [(i, score) for i, score in top if score >= min_score]
            return [(self._ids[i], score) for i, score in top]

    def export(self) -> tuple[list[str], UnitRows, np.ndarray, np.ndarray, list[np.ndarray]]:
        """(ids, unit rows, norms, labels, int8 columns) of every row, in row order.

        The unit rows' first ``len(ids)`` are the cache's; the arrays are views. All are
        valid until the cache next changes; the int8 columns (codes, bias, scale, l1) are
        empty when there is no int8 copy.
        """
        with self._lock:
            n = len(self._ids)
            if self.dims is None or self._rows is None:
                empty = UnitRows(0, 1)
                return [], empty, np.zeros(0, np.float32), np.zeros(0, np.int16), []
            self._quantise_new()
            quant = self._quant
            columns = [] if quant is None else [
                quant.codes[:n], quant.bias[:n], quant.scale[:n], quant.l1[:n]
            ]  # fmt: skip
            return list(self._ids), self._rows, self._norms[:n], self._labels[:n], columns

    def restore(
        self,
        ids: list[str],
        units: np.ndarray | UnitRows,
        norms: np.ndarray,
        labels: np.ndarray,
        columns: list[np.ndarray] | None = None,
    ) -> None:
        """Fill an empty cache with ``export``'s arrays; with its int8 ``columns`` (of the
        same dimensions) nothing is quantised again.

        ``units`` are the unit rows: an array, or ``UnitRows`` (a snapshot's file, whose
        rows are then read on demand and not held). The arrays may hold more rows than
        ``ids`` (``capacity_for``): those past ``len(ids)`` are then the cache's spare
        capacity and the arrays are taken as they are, not copied (a copy of 100,000
        rows would cost time and, while it lasts, twice their memory)."""
        n = len(ids)
        if n == 0:
            return
        with self._lock:
            if isinstance(units, UnitRows):
                dims, cap = units.dims, max(self.capacity_for(n), units.capacity)
                self._rows = units
            else:
                dims = int(units.shape[1])
                cap = max(self.capacity_for(n), int(units.shape[0]))
                self._rows = UnitRows.in_memory(_taken(units, cap, np.float32))
            self.dims = dims
            self._norms = _taken(norms, cap, np.float32)
            self._labels = _taken(labels, cap, np.int16)
            self._ids = list(ids)
            self._index = {k: i for i, k in enumerate(self._ids)}
            if simsimd is None:
                return
            if columns and columns[0].shape[1:] == (dims,) and columns[0].shape[0] >= n:
                self._quant = QuantisedRows(0, dims)
                for name, column in zip(("codes", "bias", "scale", "l1"), columns, strict=True):
                    kind = getattr(self._quant, name).dtype
                    setattr(self._quant, name, _taken(column, cap, kind))
                self._quantised = n
            else:
                self._quant = QuantisedRows(cap, dims)
                self._quantised = 0
                self._quantise_new()

    def capacity_for(self, rows: int) -> int:
        """The capacity ``restore`` gives this cache when it restores ``rows`` rows."""
        return max(self._capacity, rows + rows // 16)

    def clear(self) -> None:
        """Forget every row (used when the store is closed)."""
        with self._lock:
            if self._rows is not None:
                self._rows.close()
            self.__init__(self._capacity)  # type: ignore[misc]
