"""Conformance suites and helpers for plugin authors.

Subclass :class:`StorageBackendTests` in a backend's test module and override its
``backend_factory`` fixture; every contract clause of :class:`smriti.backend.StorageBackend`
then runs against the real backend::

    class TestMyBackend(StorageBackendTests):
        @pytest.fixture
        def backend_factory(self, tmp_path):
            ...

:class:`RecallEqualityTests` takes the same fixture and checks that the engine recalls
the same memories in the same order on the backend as on the core's reference backend.
"""

from smriti.testing.builders import T0, GraphBuilder
from smriti.testing.recall_suite import RecallEqualityTests
from smriti.testing.storage_suite import StorageBackendTests

__all__ = ["T0", "GraphBuilder", "RecallEqualityTests", "StorageBackendTests"]
