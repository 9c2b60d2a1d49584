"""The Neo4j backend against Smriti's conformance suites (tenant mode): the storage
contract and recall equality with the reference backend, read natively (several Smriti
servers sharing the database) and through the core's working set
(``SMRITI_WORKING_SET=on``: one Smriti server as the database's only writer)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from smriti_backend_neo4j.backend import Neo4jBackend

from smriti.index.indexed import IndexedBackend
from smriti.testing import RecallEqualityTests, StorageBackendTests


@pytest.fixture
def indexed_factory(
    make_backend: Callable[..., Neo4jBackend],
) -> Iterator[Callable[[str], IndexedBackend]]:
    """``make(user)``: a Neo4j backend behind a loaded working set, as the engine opens
    it with ``SMRITI_WORKING_SET=on``."""
    made: list[IndexedBackend] = []

    def make(user: str) -> IndexedBackend:
        backend = IndexedBackend(make_backend(user), 512, background=False)
        backend.open()
        assert backend.state == "ready"
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


class TestNeo4jConformance(StorageBackendTests):
    """Every contract clause against a real Neo4j server, users sharing one database."""

    @pytest.fixture
    def backend_factory(
        self, make_backend: Callable[..., Neo4jBackend]
    ) -> Callable[[str], Neo4jBackend]:
        return make_backend


class TestNeo4jRecallEquality(RecallEqualityTests):
    """The engine recalls from Neo4j's native reads what it recalls from the reference."""

    backend_factory = TestNeo4jConformance.backend_factory


class TestNeo4jWorkingSetConformance(StorageBackendTests):
    """Every contract clause with the reads answered by the working set and the writes
    going to Neo4j."""

    @pytest.fixture
    def backend_factory(
        self, indexed_factory: Callable[[str], IndexedBackend]
    ) -> Callable[[str], IndexedBackend]:
        return indexed_factory


class TestNeo4jWorkingSetRecallEquality(RecallEqualityTests):
    """The engine recalls through the working set over Neo4j what it recalls from the
    reference."""

    backend_factory = TestNeo4jWorkingSetConformance.backend_factory
