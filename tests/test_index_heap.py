"""Giving freed memory back after large transient jobs (smriti.index.heap)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from smriti.index import heap


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc only")
def test_memory_freed_below_the_top_of_the_heap_is_given_back() -> None:
    # Many small arrays (below glibc's mmap threshold) freed under one that stays:
    # glibc keeps their pages until trimmed.
    blocks = [np.ones(8_000, dtype=np.float64) for _ in range(2_000)]  # 128 MB
    keep = np.ones(8_000, dtype=np.float64)
    del blocks
    before = _rss_kib()
    assert heap.release() is True
    assert _rss_kib() < before - 64_000  # most of the freed 128 MB went back
    assert keep.sum() == 8_000
