"""Entry-point module: registers the FalkorDB backend class (imports no driver)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from smriti import StorageBackend, hookimpl

if TYPE_CHECKING:
    from smriti import BackupProvider, DoctorCheck, Settings


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The server and embedded FalkorDB backends; drivers are imported when they open."""
    from smriti_backend_falkor.backend import FalkorBackend
    from smriti_backend_falkor.embedded import FalkorLiteBackend

    return [FalkorBackend, FalkorLiteBackend]


@hookimpl
def doctor_probes(
    settings: Settings, backend: StorageBackend | None, backup: BackupProvider | None
) -> list[Callable[[], DoctorCheck]] | None:
    """Whether the FalkorDB server answers PING (with the password), for the server
    backend; the embedded one has no server to probe."""
    from smriti_backend_falkor.backend import FalkorBackend
    from smriti_backend_falkor.doctor import redis_ping
    from smriti_backend_falkor.embedded import FalkorLiteBackend

    if not isinstance(backend, FalkorBackend) or isinstance(backend, FalkorLiteBackend):
        return None
    addr, password = backend.addr, backend._password
    return [lambda: redis_ping(addr, password)]
