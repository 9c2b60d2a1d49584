"""The storage conformance suite against real LadybugDB databases: behind the working
set, and the native scans (the only native path: LadybugDB has no extension here)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_ladybug.backend import LadybugBackend

from smriti.index.indexed import IndexedBackend
from smriti.testing import RecallEqualityTests, StorageBackendTests


class TestLadybugConformance(StorageBackendTests):
    """As the engine opens it: behind a loaded working set (``smriti.index``)."""

    @pytest.fixture
    def backend_factory(
        self, indexed_factory: Callable[[str], IndexedBackend]
    ) -> Callable[[str], IndexedBackend]:
        return indexed_factory


class TestLadybugNativeScans(StorageBackendTests):
    """The raw backend as ``SMRITI_WORKING_SET=off`` opens it: asked for native indexes,
    it builds none and answers by scans (exact vectors, BM25 over CONTAINS)."""

    @pytest.fixture
    def backend_factory(
        self, ladybug_factory: Callable[..., LadybugBackend]
    ) -> Callable[[str], LadybugBackend]:
        return lambda user: ladybug_factory(user, native_indexes=True)


class TestLadybugRecallEquality(RecallEqualityTests):
    """The engine recalls on LadybugDB, behind its working set, what it recalls on the
    reference backend."""

    @pytest.fixture
    def backend_factory(
        self, indexed_factory: Callable[[str], IndexedBackend]
    ) -> Callable[[str], IndexedBackend]:
        return indexed_factory


class TestLadybugNativeRecallEquality(RecallEqualityTests):
    """The same through LadybugDB's native scans (before the working set is loaded)."""

    @pytest.fixture
    def backend_factory(
        self, ladybug_factory: Callable[..., LadybugBackend]
    ) -> Callable[[str], LadybugBackend]:
        return ladybug_factory
