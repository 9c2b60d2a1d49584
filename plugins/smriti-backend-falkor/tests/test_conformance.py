"""The shared storage conformance suite against a real FalkorDB, in both isolation modes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_falkor.backend import FalkorBackend

from smriti.testing import RecallEqualityTests, StorageBackendTests


class TestFalkorTenant(StorageBackendTests):
    """Tenant mode: every user in one graph, separated by the ``user`` property."""

    @pytest.fixture
    def backend_factory(
        self, make_backend: Callable[..., FalkorBackend]
    ) -> Callable[[str], FalkorBackend]:
        return lambda user: make_backend(user, "tenant")


class TestFalkorGraphPerUser(StorageBackendTests):
    """Graph mode: one graph per user, ``{user}_smriti``."""

    @pytest.fixture
    def backend_factory(
        self, make_backend: Callable[..., FalkorBackend]
    ) -> Callable[[str], FalkorBackend]:
        return lambda user: make_backend(user, "graph")


class TestFalkorRecallEquality(RecallEqualityTests):
    """The engine recalls on a FalkorDB server what it recalls on the reference backend."""

    @pytest.fixture
    def backend_factory(
        self, make_backend: Callable[..., FalkorBackend]
    ) -> Callable[[str], FalkorBackend]:
        return lambda user: make_backend(user, "tenant")
