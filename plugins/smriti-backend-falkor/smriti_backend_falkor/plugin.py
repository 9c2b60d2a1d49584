"""Entry-point module: registers the FalkorDB backend class (imports no driver)."""

from __future__ import annotations

from smriti import StorageBackend, hookimpl


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The FalkorDB backend; the ``falkordb`` client is imported only when it opens."""
    from smriti_backend_falkor.backend import FalkorBackend

    return [FalkorBackend]
