"""Unit rows read from a snapshot's file (smriti.backend.rows): a vector cache on them
answers exactly as one holding its rows in memory, through every change, and never maps
the file."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from smriti.backend import VectorCache
from smriti.backend import rows as rows_module
from smriti.backend import vector_cache as vectors
from smriti.backend.rows import UnitRows


def _pair(tmp_path: Path, n: int, dims: int, rng: np.random.Generator) -> tuple[VectorCache, ...]:
    raw = rng.standard_normal((n, dims)) * rng.uniform(0.5, 3, (n, 1))
    norms = np.linalg.norm(raw, axis=1).astype(np.float32)
    units = (raw / norms[:, None]).astype(np.float32)
    path = tmp_path / "units.npy"
    np.save(path, units)
    ids = [f"m{i}" for i in range(n)]
    labels = (np.arange(n) % 3).astype(np.int16)
    memory, disk = VectorCache(), VectorCache()
    memory.restore(ids, units.copy(), norms.copy(), labels.copy())
    disk.restore(ids, UnitRows.on_file(path, n, 16), norms.copy(), labels.copy())
    return memory, disk


def _same_answers(
    a: VectorCache, b: VectorCache, rng: np.random.Generator, dims: int, exact: bool = True
) -> None:
    """The same ids; the same scores, exactly or (``exact`` False: a scan in blocks sums in
    another order) within float32 rounding."""
    for trial in range(12):
        query = rng.standard_normal(dims)
        label = None if trial % 3 else trial % 2
        floor = a.search(query, 5)[-1][1] - 1e-4
        for want, got in (
            (a.search(query, 10, label), b.search(query, 10, label)),
            (a.search(query, 10, None, floor), b.search(query, 10, None, floor)),
        ):
            assert [k for k, _ in got] == [k for k, _ in want]
            scores = [s for _, s in want]
            assert [s for _, s in got] == (scores if exact else pytest.approx(scores, abs=1e-6))


@pytest.mark.parametrize("quantised", [True, False])
def test_a_cache_on_file_answers_as_one_in_memory(
    tmp_path: Path, quantised: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "QUANTISED_MIN_ROWS", 1 if quantised else 10**9)
    monkeypatch.setattr(rows_module, "BLOCK_ROWS", 97)  # blocks that split the patches
    rng = np.random.default_rng(5)
    dims, n = 24, 1500
    memory, disk = _pair(tmp_path, n, dims, rng)
    assert disk._rows is not None and disk._rows.base == n
    _same_answers(memory, disk, rng, dims)
    # Forgetting moves the last rows into the holes; new memories grow past the spare
    # rows; replacing a saved row patches it.
    gone = [f"m{i}" for i in rng.choice(n, 200, replace=False)]
    fresh = [(f"new{i}", rng.standard_normal(dims), i % 3) for i in range(300)]
    replaced = [(f"m{i}", rng.standard_normal(dims), 1) for i in range(0, 40, 3)]
    for cache in (memory, disk):
        cache.remove(gone)
        cache.put_many(fresh)
        cache.put_many(replaced)
    _same_answers(memory, disk, rng, dims, exact=quantised)
    for key in ("m3", "m1499", "new0", "new299", "m0"):
        if key in memory:
            np.testing.assert_array_equal(memory.vector(key), disk.vector(key))
    # Searches that re-score more than a quarter of the rows scan them all instead.
    monkeypatch.setattr(vectors, "RESCORE_MAX_SHARE", 0.0)
    _same_answers(memory, disk, rng, dims, exact=False)
    ids, units, *_ = disk.export()
    want_ids, want_units, *_ = memory.export()
    assert ids == want_ids
    np.testing.assert_array_equal(
        np.concatenate([b.copy() for b in units.blocks(len(ids))]), want_units.array(len(ids))
    )
    disk.clear()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_searching_a_cache_on_file_never_maps_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    _, disk = _pair(tmp_path, 5000, 32, rng)
    for _ in range(20):
        disk.search(rng.standard_normal(32), 10)
    disk.vector("m17")
    assert str(tmp_path / "units.npy") not in Path("/proc/self/maps").read_text()
    disk.clear()


def test_a_truncated_or_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "units.npy"
    np.save(path, np.zeros((10, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="not 11 float32 rows"):
        UnitRows.on_file(path, 11, 1)
    np.save(path, np.zeros((10, 4), dtype=np.float64))
    with pytest.raises(ValueError, match="float32"):
        UnitRows.on_file(path, 10, 1)
    np.save(path, np.zeros((10, 4), dtype=np.float32))
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size - 4)
    with pytest.raises(ValueError, match="truncated"):
        UnitRows.on_file(path, 10, 1)
