"""Entry-point module: registers the Neo4j backend with Smriti's plugin manager.

Kept light: the ``neo4j`` driver is imported only when a backend is opened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from smriti import StorageBackend, hookimpl

if TYPE_CHECKING:
    from smriti import BackupProvider, DoctorCheck, Settings


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The Neo4j backend, selected by ``DB_TYPE=neo4j``."""
    from smriti_backend_neo4j.backend import Neo4jBackend

    return [Neo4jBackend]


@hookimpl
def doctor_probes(
    settings: Settings, backend: StorageBackend | None, backup: BackupProvider | None
) -> list[Callable[[], DoctorCheck]] | None:
    """A Bolt handshake with ``NEO4J_URI``, when the Neo4j backend is configured."""
    from smriti_backend_neo4j.backend import Neo4jBackend
    from smriti_backend_neo4j.doctor import bolt

    if not isinstance(backend, Neo4jBackend):
        return None
    uri = backend.uri
    return [lambda: bolt(uri)]
