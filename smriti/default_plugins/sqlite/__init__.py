"""The built-in ``sqlite`` storage backend, the reference backend of the core.

A store is one standard-library SQLite file per user (``backend``); it needs nothing
beyond the core's own dependencies, so the engine can be used and tested without any
backend plugin. This module only registers the class: the backend is imported when the
registry is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from smriti.backend import StorageBackend


@hookimpl
def register_storage_backends() -> list[type[StorageBackend]]:
    """The SQLite backend (``DB_TYPE=sqlite``)."""
    from smriti.default_plugins.sqlite.backend import SqliteBackend

    return [SqliteBackend]
