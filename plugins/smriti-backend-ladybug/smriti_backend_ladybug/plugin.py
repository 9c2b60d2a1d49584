"""Entry point of the LadybugDB backend plugin: registers the backend class only.

The driver (``ladybug``) is imported when a store is opened, never here: it cannot share
a process with Kùzu's, and listing plugins must not import either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from smriti.backend import StorageBackend


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The LadybugDB backend (``DB_TYPE=ladybug``)."""
    from smriti_backend_ladybug.backend import LadybugBackend

    return [LadybugBackend]
