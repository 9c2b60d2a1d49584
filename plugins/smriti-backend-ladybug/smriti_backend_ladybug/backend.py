"""The LadybugDB storage backend: the shared embedded graph backend on the ``ladybug``
driver (LadybugDB, Kùzu's maintained fork).

LadybugDB's wheels do not carry its ``fts`` and ``vector`` extensions (``INSTALL`` would
download them), so this backend never loads or installs one: the working set
(``smriti.index``) answers vector and lexical recall, and before it is loaded, above its
budget or with ``SMRITI_WORKING_SET=off`` the native reads scan (exact cosine over the
stored embeddings, BM25 over a ``CONTAINS`` scan). It cannot open Kùzu files: a Kùzu
store moves here with ``smriti migrate --to ladybug``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from smriti_embedded_graph.backend import EmbeddedGraphBackend

#: The database file in ``{STORAGE_LOCATION}/{user}/``.
DB_FILE = "memory.lbug"


class LadybugBackend(EmbeddedGraphBackend):
    """Embedded LadybugDB graph database, one file per user; the store's only writer."""

    name: ClassVar[str] = "ladybug"
    description: ClassVar[str] = "LadybugDB embedded graph database, one store per user"
    driver_module: ClassVar[str] = "ladybug"
    driver_distribution: ClassVar[str] = "smriti-backend-ladybug"
    engine: ClassVar[str] = "LadybugDB"
    db_file: ClassVar[str] = DB_FILE
    store_files: ClassVar[tuple[str, ...]] = (DB_FILE,)
    native_extensions: ClassVar[bool] = False
    #: LadybugDB's ``EXPORT DATABASE`` writes parquet only.
    export_format: ClassVar[str] = "parquet"
    #: A write cut short by a full disk leaves a torn last record in the WAL, which
    #: LadybugDB's checksums then refuse at every open ("the WAL file is corrupted"):
    #: replay the whole records and drop the torn one, as Kùzu does. Nothing
    #: acknowledged is lost: a memory is acknowledged once in the journal, which the
    #: open replays after the WAL (tests: a full disk on a tmpfs and under RLIMIT_FSIZE).
    database_options: ClassVar[dict[str, Any]] = {"throw_on_wal_replay_failure": False}
    #: A new store gets the highest preference among the installed engines
    #: (``DB_TYPE=auto``): LadybugDB is maintained and has wheels for every platform.
    preference: ClassVar[int] = 20
