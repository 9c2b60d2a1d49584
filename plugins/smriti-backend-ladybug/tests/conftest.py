"""Fixtures for the LadybugDB backend tests: real databases in pytest's tmp_path.

These tests import ``ladybug``, which cannot share a process with ``kuzu``: the main
test run ignores this directory and runs it in a child pytest of its own
(``tests/test_engines_apart.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from smriti_backend_ladybug.backend import DB_FILE, LadybugBackend

from smriti.index.indexed import IndexedBackend


@pytest.fixture
def ladybug_factory(tmp_path: Path) -> Iterator[Callable[..., LadybugBackend]]:
    """``make(user, native_indexes=...)``: an opened store under tmp_path, closed
    afterwards (``native_indexes`` is asked for and must be refused: no extension)."""
    made: list[LadybugBackend] = []

    def make(user: str, native_indexes: bool = False) -> LadybugBackend:
        backend = LadybugBackend(user, tmp_path / user / DB_FILE, native_indexes=native_indexes)
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
        inner = LadybugBackend(user, tmp_path / user / DB_FILE)
        backend = IndexedBackend(inner, 512, background=False)
        backend.open()
        assert backend.state == "ready"
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
