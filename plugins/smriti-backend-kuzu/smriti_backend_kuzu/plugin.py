"""Entry point of the Kùzu backend plugin: registers the backend class only.

The driver (``kuzu``) is imported when a store is opened, so loading this plugin stays
cheap, a missing native library fails only this backend, and listing plugins never
imports it beside LadybugDB's (the two cannot share a process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from smriti.backend import StorageBackend


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The Kùzu backend (``DB_TYPE=kuzu``)."""
    from smriti_backend_kuzu.backend import KuzuBackend

    return [KuzuBackend]
