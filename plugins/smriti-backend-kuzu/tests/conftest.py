"""Fixtures for the Kùzu backend tests: real databases in pytest's tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from smriti_backend_kuzu.backend import DB_FILE, KuzuBackend

Make = Callable[[str], KuzuBackend]


@pytest.fixture
def kuzu_factory(tmp_path: Path) -> Iterator[Callable[..., KuzuBackend]]:
    """``make(user, cache_mb=...)``: an opened store under tmp_path, closed afterwards."""
    made: list[KuzuBackend] = []

    def make(user: str, cache_mb: int = 2048) -> KuzuBackend:
        backend = KuzuBackend(user, tmp_path / user / DB_FILE, cache_mb=cache_mb)
        backend.open()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
