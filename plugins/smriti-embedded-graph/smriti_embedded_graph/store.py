"""The database of one embedded graph store: connections, transactions, durability.

``GraphStore`` holds the engine's ``Database``, one connection per thread with its
prepared statements, the locks every write takes, the gate that keeps reads out of a
commit's checkpoint, the manifest that keeps a damaged file from opening as an empty
store, and the error mapping (a full disk, a failed write of Kùzu's files). It knows
nothing of the journal, the cues or the contract: the backend's collaborators
(``writebehind``, ``writes``, ``queries``, ``erase``) run their statements through it.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import Any

from smriti import get_logger
from smriti.backend import BackendError, StoreLockedError, WriteGate
from smriti_embedded_graph import durability
from smriti_embedded_graph.cuemap import CueMap

log = get_logger(__name__)
#: The largest a store may grow. Kùzu reserves this much address space per open store
#: (8 TB by default), so one process with many stores open (a team server with
#: SMRITI_OWNER=off) ran out of it after about 15; at 1 TB, over a hundred fit.
MAX_DB_BYTES = 1 << 40


class GraphStore:
    """The engine's database at ``path`` (``engine`` names it in messages) and the
    connections to it; ``cues`` counts the stored engrams for the manifest."""

    def __init__(
        self,
        path: Path,
        engine: str,
        cues: CueMap,
        *,
        native_extensions: bool,
        buffer_mb: int,
        database_options: dict[str, Any],
    ) -> None:
        self.path = path
        self.engine = engine
        self.cues = cues
        #: Whether the engine's ``fts`` and ``vector`` extensions are loaded.
        self.native_extensions = native_extensions
        self.buffer_mb = buffer_mb
        self.database_options = database_options
        self.driver: ModuleType | None = None
        self.db: Any = None
        self._local = threading.local()
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        #: One logical writer: a store's enqueue, an update, a delete.
        self.write_lock = threading.RLock()
        #: One Kùzu write transaction at a time (see ``writebehind`` for the lock order).
        self.kuzu_lock = threading.RLock()
        #: Reads pass together; a commit or checkpoint passes alone. Kùzu 0.11.3
        #: checkpoints inside COMMIT (forced after a COPY or an index DDL) while holding
        #: the lock every transaction needs to end, so a read running meanwhile cannot
        #: finish, and after 5 s the commit fails ("Timeout waiting for active
        #: transactions"); several processes sharing one owner made that frequent.
        self.quiet = WriteGate()
        self.generation = 0
        #: The generation (open database) whose extensions are loaded.
        self._extensions = -1
        #: Bumped when the schema or indexes change: prepared statements are then stale.
        self.schema_epoch = 0
        #: The width of the HNSW index's vectors (None when it is not built).
        self.vector_index_dims: int | None = None
        #: The manifest as last read or written; None for a store made before them.
        self.manifest: durability.Manifest | None = None
        #: Whether the open passed the manifest's checks (only then is it updated).
        self.verified = False
        #: Whether a Kùzu read or write of its files failed (closing may then abort).
        self.kuzu_failed = False

    # -- the database ---------------------------------------------------------------------
    def open_database(self, driver: ModuleType) -> None:
        """Open the engine's database with ``driver`` (BackendError naming the cause:
        a full disk, another process, a damaged file)."""
        self.driver = driver
        try:
            # Checkpoints are ours: an automatic one failing inside a commit leaves the
            # connection unusable and the process aborting at close (durability).
            self.db = self._new_database()
        except RuntimeError as exc:
            raise self._open_error(exc) from exc
        self.generation += 1

    def _new_database(self) -> Any:
        if self.driver is None:
            raise BackendError(f"the {self.engine} driver is not loaded: open the store first")
        return self.driver.Database(
            str(self.path),
            buffer_pool_size=self.buffer_mb * 2**20,
            auto_checkpoint=False,
            max_db_size=MAX_DB_BYTES,
            **self.database_options,
        )

    def _open_error(self, exc: Exception) -> BackendError:
        text = str(exc)
        if durability.is_io_failure(exc) and (
            durability.is_full(exc) or not durability.has_room(self.path, durability.STORE_RESERVE)
        ):
            return durability.disk_full(self.path, "the store cannot be opened")
        if "lock" in text.lower():
            return StoreLockedError(
                f"the {self.engine} store {self.path} is in use by another process (one process "
                "at a time): stop the other smriti server or use another STORAGE_LOCATION"
            )
        return BackendError(
            f"cannot open the {self.engine} store {self.path}: {text}. The file was left "
            "untouched; move it aside or point STORAGE_LOCATION elsewhere"
        )

    def close_connections(self) -> None:
        """Close (or, after a failed write of Kùzu's files, abandon) every thread's
        connection and the database; the caller holds the write and Kùzu locks."""
        with self._conns_lock:
            for conn in self._conns:
                if self.kuzu_failed:
                    durability.abandon(conn)
                    continue
                with suppress(Exception):  # best effort; closing the db below flushes
                    conn.close()
            self._conns.clear()
            self.drop_prepared()
            self.generation += 1
            if self.db is not None:
                self._close_database()

    def _close_database(self) -> None:
        """Close Kùzu's database, or, after a failed write of its files, abandon it:
        closing (or checkpointing) it then aborted or crashed the process (durability)."""
        db, self.db = self.db, None
        if self.kuzu_failed:
            durability.abandon(db)
            log.error(
                "kuzu store left unclosed after a failed write of its files; every "
                "committed memory is in its WAL, every stored one in the journal",
                path=str(self.path),
            )
            return
        db.close()

    def close_for_swap(self) -> None:
        """Close every connection and the database, keeping what the backend holds in
        memory (cues, engram ids): the rebuilt file holds the same rows."""
        with self._conns_lock:
            for conn in self._conns:
                with suppress(Exception):  # as close(): closing the database flushes
                    conn.close()
            self._conns.clear()
            self.drop_prepared()
            self.generation += 1
            db, self.db = self.db, None
        db.close()

    def reopen_after_swap(self) -> None:
        """Open the database again after an erase's swap (if it was closed)."""
        if self.db is not None:  # the old database never closed: it is still in use
            return
        self.db = self._new_database()
        self.generation += 1
        self.schema_epoch += 1

    def needs_reopen(self) -> bool:
        """After Kùzu failed to write its files it takes no more writes in this process;
        once the disk has room for the replay and a checkpoint, a new open recovers."""
        if not self.kuzu_failed:
            return False
        wal = self.path.with_name(self.path.name + ".wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        needed = durability.checkpoint_room(wal_bytes) + durability.STORE_RESERVE
        return durability.has_room(self.path, needed)

    def db_size_hint(self) -> int:
        """Size of the database file in bytes (0 when missing)."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    # -- connections and statements -----------------------------------------------------
    def conn(self) -> Any:
        """This thread's connection to the open database."""
        local = self._local
        if getattr(local, "generation", None) != self.generation or local.conn is None:
            if self.db is None or self.driver is None:
                raise BackendError(f"the {self.engine} store {self.path} is not open")
            conn = self.driver.Connection(self.db)
            # Once per database: extensions are loaded database-wide, and each LOAD
            # is a write transaction with a WAL record, which a full disk made fail
            # (and Kùzu unsafe) in a read on a new thread.
            with self.kuzu_lock:
                if self.native_extensions and self._extensions != self.generation:
                    for extension in ("fts", "vector"):
                        conn.execute(f"LOAD {extension}")
                    self._extensions = self.generation
            with self._conns_lock:
                self._conns.append(conn)
            local.conn, local.generation, local.prepared = conn, self.generation, {}
        return local.conn

    def current(self, conn: Any) -> bool:
        """Whether ``conn`` (this thread's) is on the open database: an erase that rebuilt
        the file between making it and passing the quiet gate closed its database."""
        local = self._local  # replaced at a close or an erase's swap (drop_prepared)
        return (
            conn is getattr(local, "conn", None)
            and getattr(local, "generation", None) == self.generation
        )

    def drop_prepared(self) -> None:
        """Drop every thread's connection and prepared statements: a prepared statement
        keeps its database mapped after both are closed (LadybugDB: 1 TB of address
        space each, so a process ran out after ~125 closed stores)."""
        self._local = threading.local()

    def exec(self, conn: Any, query: str, params: dict[str, Any] | None = None) -> Any:
        """Execute through a per-thread prepared-statement cache.

        Preparing costs about 3 ms per statement in Kùzu 0.11, more than most of our
        executions; the cache is dropped whenever the schema or indexes change.
        """
        cache: dict[tuple[int, str], Any] = self._local.__dict__.setdefault("prepared", {})
        key = (self.schema_epoch, query)
        prepared = cache.get(key)
        if prepared is None:
            with warnings.catch_warnings():  # prepare() is "deprecated" but still the API
                warnings.simplefilter("ignore", DeprecationWarning)
                prepared = conn.prepare(query)
            if not prepared.is_success():
                raise RuntimeError(prepared.get_error_message())
            cache[key] = prepared
        return conn.execute(prepared, params or {})

    def read(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """All rows of a read query on this thread's connection, inside the quiet gate
        (retried on the new database when an erase swapped the file meanwhile)."""
        while True:
            conn = self.conn()  # first: making one may take the lock a checkpoint holds
            with self.quiet.shared():
                if self.current(conn):
                    return self.exec(conn, query, params).get_all()

    @staticmethod
    @contextmanager
    def transaction(conn: Any) -> Iterator[None]:
        """``BEGIN`` on ``conn``, rolled back on any error; the caller commits."""
        conn.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            with suppress(RuntimeError):  # Kùzu may have rolled back already
                conn.execute("ROLLBACK")
            raise

    def commit(self, conn: Any) -> None:
        """``COMMIT`` with no read running (it may checkpoint)."""
        try:
            with self.quiet.exclusive():
                conn.execute("COMMIT")
        except RuntimeError as exc:
            raise self.kuzu_error(exc, f"{self.engine} commit failed on {self.path}") from exc

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Kùzu's failures of a write as BackendErrors (StorageFullError on a full disk)."""
        try:
            yield
        except RuntimeError as exc:
            raise self.kuzu_error(exc, f"{self.engine} write failed on {self.path}") from exc

    # -- durability ---------------------------------------------------------------------
    def kuzu_error(self, exc: Exception, what: str) -> BackendError:
        """The error for a failed Kùzu statement (StorageFullError on a full disk)."""
        if durability.is_io_failure(exc):
            self.kuzu_failed = True
            if durability.is_full(exc) or not durability.has_room(
                self.path, durability.STORE_RESERVE
            ):
                return durability.disk_full(self.path, what)
        return BackendError(f"{what}: {exc}")

    def check_room(self, needed: int, what: str) -> None:
        """Refuse (StorageFullError naming ``what``) a Kùzu write that might not fit,
        and any write after a failed one: Kùzu's state is then unsafe to write."""
        if self.kuzu_failed:
            raise durability.kuzu_failed(self.path, what)
        if not durability.has_room(self.path, durability.KUZU_RESERVE + needed):
            raise durability.disk_full(self.path, what)

    def check_store_room(self, line: int) -> None:
        """Refuse a new memory (of a ``line``-byte journal line) the store cannot keep:
        with its journal line, Kùzu's WAL record and checkpoint beyond the reserve that
        lets the memories already journaled reach Kùzu."""
        what = "the memory was not stored"
        if self.kuzu_failed:
            raise durability.kuzu_failed(self.path, what)
        if not durability.has_room(self.path, durability.STORE_RESERVE + 3 * line):
            raise durability.disk_full(self.path, what)

    def known_engrams(self) -> int:
        """How many memories the store holds (the queued ones included)."""
        ids = self.cues.engram_ids
        if ids is not None:
            return len(ids)
        return int(self.read("MATCH (e:Engram) RETURN count(e)")[0][0])

    def save_manifest(self) -> None:
        """Raise (or lower) the manifest to the store's count and file size, once the
        open has passed its checks. A failure keeps the old manifest, a lower bound."""
        if not self.verified:
            return
        try:
            manifest = durability.Manifest(self.known_engrams(), self.db_size_hint())
            if manifest != self.manifest:
                durability.write_manifest(self.path, manifest)
                self.manifest = manifest
        except (OSError, RuntimeError, BackendError) as exc:
            log.warning("kuzu manifest not updated", path=str(self.path), error=str(exc))

    def lower_manifest(self, deleting: int) -> None:
        """Before up to ``deleting`` memories are deleted: lower the manifest's count,
        so the smaller store still opens (nothing is deleted if this fails)."""
        old = self.manifest
        if old is None or deleting <= 0:
            return
        floor = max(0, min(old.engrams, self.known_engrams() - deleting))
        if floor == old.engrams:
            return
        manifest = durability.Manifest(floor, old.db_bytes)
        try:
            durability.write_manifest(self.path, manifest)
        except OSError as exc:
            raise durability.disk_full(self.path, "nothing was deleted") from exc
        self.manifest = manifest

    def lower_manifest_size(self, size: int) -> None:
        """Before a smaller file replaces the old one: lower the manifest's size (it
        guards against a shrunken file), so a crash right after the swap still opens."""
        old = self.manifest
        if old is not None and size < old.db_bytes:
            manifest = durability.Manifest(old.engrams, size)
            durability.write_manifest(self.path, manifest)
            self.manifest = manifest
