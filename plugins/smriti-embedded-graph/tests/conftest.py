"""Fixtures for the shared embedded-graph tests: real stores of the engine named by
``SMRITI_TEST_ENGINE`` (``kuzu`` in the main test run; ``ladybug`` in its own child
process, started by ``tests/test_engines_apart.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from smriti_embedded_graph.backend import EmbeddedGraphBackend
from smriti_embedded_graph.testing import engine_under_test


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[Callable[..., EmbeddedGraphBackend]]:
    """``make(user, native_indexes=...)``: an opened store under tmp_path, closed
    afterwards."""
    made: list[EmbeddedGraphBackend] = []
    engine = engine_under_test()

    def make(user: str, native_indexes: bool = False) -> EmbeddedGraphBackend:
        backend = engine(user, tmp_path / user / engine.db_file, native_indexes=native_indexes)
        backend.open()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
