"""The Neo4j backend against Smriti's storage conformance suite (tenant mode)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_neo4j.backend import Neo4jBackend

from smriti.testing import StorageBackendTests


class TestNeo4jConformance(StorageBackendTests):
    """Every contract clause against a real Neo4j server, users sharing one database."""

    @pytest.fixture
    def backend_factory(
        self, make_backend: Callable[..., Neo4jBackend]
    ) -> Callable[[str], Neo4jBackend]:
        return make_backend
