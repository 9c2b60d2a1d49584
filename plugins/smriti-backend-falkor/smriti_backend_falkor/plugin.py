"""Entry-point module: registers the FalkorDB backend class (imports no driver)."""

from __future__ import annotations

from smriti import StorageBackend, hookimpl


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The server and embedded FalkorDB backends; drivers are imported when they open."""
    from smriti_backend_falkor.backend import FalkorBackend
    from smriti_backend_falkor.embedded import FalkorLiteBackend

    return [FalkorBackend, FalkorLiteBackend]
