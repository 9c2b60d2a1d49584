"""The storage conformance suite against real Kùzu databases: the native reads (with and
without Kùzu's own indexes) and the working set in front of them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_kuzu.backend import KuzuBackend

from smriti.index.indexed import IndexedBackend
from smriti.testing import RecallEqualityTests, StorageBackendTests


class TestKuzuConformance(StorageBackendTests):
    """As the engine opens it: behind a loaded working set (``smriti.index``)."""

    @pytest.fixture
    def backend_factory(
        self, indexed_factory: Callable[[str], IndexedBackend]
    ) -> Callable[[str], IndexedBackend]:
        return indexed_factory


class TestKuzuNativeScans(StorageBackendTests):
    """The raw backend without Kùzu's indexes: the native path before a working set is
    loaded or above its budget (exact vector scan, CONTAINS scan with BM25)."""

    @pytest.fixture
    def backend_factory(
        self, kuzu_factory: Callable[..., KuzuBackend]
    ) -> Callable[[str], KuzuBackend]:
        return kuzu_factory


class TestKuzuNativeIndexes(StorageBackendTests):
    """The raw backend with ``SMRITI_WORKING_SET=off``: HNSW and full-text indexes above
    the threshold, exact scans below."""

    @pytest.fixture
    def backend_factory(
        self, kuzu_factory: Callable[..., KuzuBackend]
    ) -> Callable[[str], KuzuBackend]:
        return lambda user: kuzu_factory(user, native_indexes=True)


class TestKuzuRecallEquality(RecallEqualityTests):
    """The engine recalls on Kùzu, behind its working set, what it recalls on the
    reference backend."""

    @pytest.fixture
    def backend_factory(
        self, indexed_factory: Callable[[str], IndexedBackend]
    ) -> Callable[[str], IndexedBackend]:
        return indexed_factory


class TestKuzuNativeRecallEquality(RecallEqualityTests):
    """The same through Kùzu's native reads (before the working set is loaded)."""

    @pytest.fixture
    def backend_factory(
        self, kuzu_factory: Callable[..., KuzuBackend]
    ) -> Callable[[str], KuzuBackend]:
        return kuzu_factory
