"""The storage conformance suite against real Kùzu databases."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_kuzu.backend import KuzuBackend

from smriti.testing import StorageBackendTests


class TestKuzuConformance(StorageBackendTests):
    """Default configuration: in-process vector cache, FTS index above the threshold."""

    @pytest.fixture
    def backend_factory(
        self, kuzu_factory: Callable[..., KuzuBackend]
    ) -> Callable[[str], KuzuBackend]:
        return kuzu_factory


class TestKuzuWithoutVectorCache(StorageBackendTests):
    """Cache disabled (memory budget 0): HNSW index above the threshold, exact scan below."""

    @pytest.fixture
    def backend_factory(
        self, kuzu_factory: Callable[..., KuzuBackend]
    ) -> Callable[[str], KuzuBackend]:
        return lambda user: kuzu_factory(user, cache_mb=0)
