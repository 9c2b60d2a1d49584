"""The vector cache's float32 rows, those a snapshot saved read from its file on demand.

A search scans the int8 copy of every row and re-scores a few hundred rows exactly, so
the float32 rows are read a few at a time. Mapping the snapshot's file instead made each
touched row's page folio resident (2 MB on kernels with large folios): after a few
hundred searches the whole file (150 MB at 100,000 x 384) counted against the process.
``os.pread`` copies a row out of the page cache without mapping it, and the kernel keeps
or drops those pages as memory allows.

So ``UnitRows`` holds rows ``[0, base)`` in a file (read-only: a row changed since lives
in ``patches``), and rows from ``base`` on in ``tail``, an array in memory. Without a
file ``base`` is 0 and every row is in memory.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np

#: Rows per read when every row is wanted (a scan, a snapshot save): 12 MB at 384 dims.
BLOCK_ROWS = 8192


class FileRows:
    """Float32 rows of ``dims`` from ``offset`` in an open file (read by pread)."""

    def __init__(self, path: Path, offset: int, dims: int) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self.offset, self.dims = offset, dims
        self.row_bytes = 4 * dims
        # The file is replaced by the next save; this descriptor keeps the old one.
        self._close = weakref.finalize(self, os.close, self.fd)

    def read(self, start: int, out: np.ndarray) -> None:
        """Fill ``out`` (``len(out)`` contiguous rows) with the rows from ``start``."""
        view = memoryview(out.reshape(-1).view(np.uint8))
        at = self.offset + start * self.row_bytes
        done = os.preadv(self.fd, [view], at)
        while done < view.nbytes:
            got = os.preadv(self.fd, [view[done:]], at + done)
            if got <= 0:
                raise OSError(f"working-set vectors: the file ended at row {start}")
            done += got

    def gather(
        self, rows: list[int], out: np.ndarray, at: list[int], patches: dict[int, np.ndarray]
    ) -> None:
        """``out[at[j]] = row rows[j]`` for every ``j`` (a patched row from ``patches``):
        one pread each, the loop kept lean (a search reads a few hundred)."""
        view = memoryview(out.reshape(-1).view(np.uint8))
        size, fd, offset, preadv = self.row_bytes, self.fd, self.offset, os.preadv
        for row, slot in zip(rows, at, strict=True):
            patch = patches.get(row)
            if patch is not None:
                out[slot] = patch
            elif preadv(fd, [view[slot * size : (slot + 1) * size]], offset + row * size) != size:
                self.read(row, out[slot : slot + 1])  # a short read: finish it (or raise)

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._close()


def npy_rows(path: Path) -> tuple[int, tuple[int, ...], np.dtype]:
    """(offset of the data, shape, dtype) of the C-ordered array in the .npy ``path``."""
    with path.open("rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        if fortran or dtype.hasobject or not shape:
            raise ValueError(f"{path.name}: not a C-ordered array of numbers")
        return fh.tell(), shape, dtype


class UnitRows:
    """A growable float32 matrix: rows below ``base`` read from a file, the rest in memory.

    Not thread-safe on its own: ``VectorCache`` calls it under its lock.
    """

    def __init__(self, dims: int, capacity: int = 64) -> None:
        self.dims = dims
        self.file: FileRows | None = None
        self.base = 0
        self.patches: dict[int, np.ndarray] = {}
        self.tail = np.zeros((max(1, capacity), dims), dtype=np.float32)

    @classmethod
    def in_memory(cls, matrix: np.ndarray) -> UnitRows:
        """Rows held in ``matrix`` itself (its rows past the used ones are spare)."""
        rows = cls(int(matrix.shape[1]), 1)
        rows.tail = matrix
        return rows

    @classmethod
    def on_file(cls, path: Path, count: int, spare: int) -> UnitRows:
        """The first ``count`` rows of the .npy file ``path``, read on demand, with room
        for ``spare`` more in memory."""
        offset, shape, dtype = npy_rows(path)
        if dtype != np.float32 or len(shape) != 2 or shape[0] < count:
            raise ValueError(f"{path.name}: not {count} float32 rows")
        rows = cls(int(shape[1]), spare)
        expected = offset + shape[0] * shape[1] * 4
        if path.stat().st_size < expected:
            raise ValueError(f"{path.name}: truncated")
        rows.file = FileRows(path, offset, int(shape[1]))
        rows.base = count
        return rows

    @property
    def capacity(self) -> int:
        return self.base + self.tail.shape[0]

    def close(self) -> None:
        """Release the file (the rows are unreadable afterwards)."""
        if self.file is not None:
            self.file.close()

    # -- reads ------------------------------------------------------------------------------
    def take(self, index: np.ndarray) -> np.ndarray:
        """The rows ``index`` (a copy)."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        if self.base == 0:
            return self.tail[index]
        out = np.empty((index.size, self.dims), dtype=np.float32)
        in_tail = index >= self.base
        if in_tail.any():
            out[in_tail] = self.tail[index[in_tail] - self.base]
        at = np.flatnonzero(~in_tail)
        self.file.gather(index[at].tolist(), out, at.tolist(), self.patches)  # type: ignore[union-attr]
        return out

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` (a copy)."""
        if i >= self.base:
            return self.tail[i - self.base].copy()
        patch = self.patches.get(i)
        if patch is not None:
            return patch.copy()
        out = np.empty((1, self.dims), dtype=np.float32)
        self.file.read(i, out)  # type: ignore[union-attr]
        return out[0]

    def array(self, n: int) -> np.ndarray:
        """Rows ``[0, n)`` as one array (a view when they are all in memory)."""
        return self.tail[:n] if self.base == 0 else self.range(0, n)

    def range(self, start: int, end: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``[start, end)``: a copy, or ``out`` filled with them."""
        if out is None:
            out = np.empty((end - start, self.dims), dtype=np.float32)
        split = min(max(start, self.base), end)
        if split > start:
            self.file.read(start, out[: split - start])  # type: ignore[union-attr]
            for i, patch in self.patches.items():
                if start <= i < split:
                    out[i - start] = patch
        if end > split:
            out[split - start :] = self.tail[split - self.base : end - self.base]
        return out

    def blocks(self, n: int) -> Iterator[np.ndarray]:
        """Rows ``[0, n)`` in order, a block at a time (each block valid until the next)."""
        if self.base == 0:
            yield self.tail[:n]
            return
        buffer = np.empty((min(BLOCK_ROWS, n), self.dims), dtype=np.float32)
        for start in range(0, n, BLOCK_ROWS):
            end = min(start + BLOCK_ROWS, n)
            yield self.range(start, end, buffer[: end - start])

    def dot(self, vector: np.ndarray, n: int) -> np.ndarray:
        """Rows ``[0, n)`` times ``vector``."""
        if self.base == 0:
            return self.tail[:n] @ vector  # type: ignore[no-any-return]
        parts = [block @ vector for block in self.blocks(n)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

    # -- writes -----------------------------------------------------------------------------
    def set(self, start: int, values: np.ndarray) -> None:
        """Set rows ``[start, start + len(values))``."""
        end = start + len(values)
        for i in range(start, min(end, self.base)):
            self.patches[i] = np.array(values[i - start], dtype=np.float32)
        if end > self.base:
            first = max(start, self.base)
            while end - self.base > self.tail.shape[0]:
                self._grow()
            self.tail[first - self.base : end - self.base] = values[first - start :]

    def move(self, src: int, dst: int) -> None:
        """Row ``dst`` takes row ``src``'s value (``src`` is being dropped)."""
        self.set(dst, self.row(src)[None, :])
        self.patches.pop(src, None)

    def _grow(self) -> None:
        tail = np.zeros((max(64, self.tail.shape[0] * 3 // 2), self.dims), dtype=np.float32)
        tail[: self.tail.shape[0]] = self.tail
        self.tail = tail
