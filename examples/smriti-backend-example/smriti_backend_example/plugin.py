"""Entry point of ``smriti-backend-example``: the backend (``DB_TYPE=jsonfile``) and
its doctor probe."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from smriti import DoctorCheck, StorageBackend, hookimpl

if TYPE_CHECKING:
    from smriti import BackupProvider


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The JSON file backend, selected by ``DB_TYPE=jsonfile``."""
    from smriti_backend_example.backend import JsonFileBackend

    return [JsonFileBackend]


@hookimpl
def doctor_probes(
    settings: Any, backend: StorageBackend | None, backup: BackupProvider | None
) -> list[Callable[[], DoctorCheck]] | None:
    """Whether the user's JSON file (when there is one) can be read, for this backend."""
    from smriti_backend_example.backend import JsonFileBackend
    from smriti_backend_example.doctor import file_check

    if not isinstance(backend, JsonFileBackend):
        return None
    path = backend.path
    return [lambda: file_check(path)]
