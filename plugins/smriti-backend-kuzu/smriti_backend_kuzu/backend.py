"""The Kùzu storage backend: the shared embedded graph backend on the ``kuzu`` driver.

Kùzu 0.11.3 (its last release) bundles its ``fts`` and ``vector`` extensions, so with
``SMRITI_WORKING_SET=off`` this backend builds Kùzu's full-text and HNSW indexes; with a
working set (the default) it needs neither. Everything else is ``smriti_embedded_graph``.
"""

from __future__ import annotations

from typing import ClassVar

from smriti_embedded_graph.backend import EmbeddedGraphBackend

#: The database file in ``{STORAGE_LOCATION}/{user}/``.
DB_FILE = "memory.kuzu"


class KuzuBackend(EmbeddedGraphBackend):
    """Embedded Kùzu graph database, one file per user; the store's only writer."""

    name: ClassVar[str] = "kuzu"
    description: ClassVar[str] = "Kùzu embedded graph database, one store per user"
    driver_module: ClassVar[str] = "kuzu"
    driver_distribution: ClassVar[str] = "smriti-backend-kuzu"
    engine: ClassVar[str] = "Kùzu"
    db_file: ClassVar[str] = DB_FILE
    store_files: ClassVar[tuple[str, ...]] = (DB_FILE,)
    native_extensions: ClassVar[bool] = True
    #: A new store gets the highest preference among the installed engines
    #: (``DB_TYPE=auto``): Kùzu is archived, so it is chosen only where LadybugDB is
    #: not installed.
    preference: ClassVar[int] = 10
