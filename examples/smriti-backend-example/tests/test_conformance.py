"""The example backend passes the storage conformance suite every backend subclasses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from smriti_backend_example import JsonFileBackend

from smriti.backend import BackendOptions, StorageBackend
from smriti.testing.storage_suite import Make, StorageBackendTests


class TestJsonFileConformance(StorageBackendTests):
    """Every clause of the contract, on one JSON file per user under ``tmp_path``."""

    @pytest.fixture
    def backend_factory(self, tmp_path: Path) -> Iterator[Make]:
        opened: list[StorageBackend] = []

        def make(user: str) -> StorageBackend:
            fast = {"SMRITI_JSONFILE_FSYNC": "off"}  # the suite writes a lot; fsync adds nothing
            options = BackendOptions(user, tmp_path / user, settings=fast)
            backend = JsonFileBackend.from_options(options)
            backend.open()
            opened.append(backend)
            return backend

        yield make
        for backend in opened:
            backend.close()
