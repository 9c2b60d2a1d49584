"""Fixtures for the Kùzu backend tests: real databases in pytest's tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from smriti_backend_kuzu.backend import DB_FILE, KuzuBackend

from smriti.index.indexed import IndexedBackend

Make = Callable[[str], KuzuBackend]


@pytest.fixture
def kuzu_factory(tmp_path: Path) -> Iterator[Callable[..., KuzuBackend]]:
    """``make(user, native_indexes=...)``: an opened store under tmp_path, closed
    afterwards. Without ``native_indexes`` (the product's default, where a working set
    answers recall) Kùzu's own indexes are never built."""
    made: list[KuzuBackend] = []

    def make(user: str, native_indexes: bool = False) -> KuzuBackend:
        backend = KuzuBackend(user, tmp_path / user / DB_FILE, native_indexes=native_indexes)
        backend.open()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def indexed_factory(tmp_path: Path) -> Iterator[Callable[[str], IndexedBackend]]:
    """``make(user)``: a store behind a loaded working set, as the engine opens it."""
    made: list[IndexedBackend] = []

    def make(user: str) -> IndexedBackend:
        backend = IndexedBackend(
            KuzuBackend(user, tmp_path / user / DB_FILE), 512, background=False
        )
        backend.open()
        assert backend.state == "ready"
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
