"""Entry-point module: registers the Neo4j backend with Smriti's plugin manager.

Kept light: the ``neo4j`` driver is imported only when a backend is opened.
"""

from __future__ import annotations

from smriti import StorageBackend, hookimpl


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The Neo4j backend, selected by ``DB_TYPE=neo4j``."""
    from smriti_backend_neo4j.backend import Neo4jBackend

    return [Neo4jBackend]
