"""The embedded graph storage backend shared by Kùzu and LadybugDB: one database per user.

The two engines speak the same Cypher through the same Python API; a subclass names its
driver module, its file name and whether the engine has its full-text and vector
extensions (``EmbeddedGraphBackend``'s class attributes). The store lives at
``{STORAGE_LOCATION}/{user}/{db_file}``. The driver is imported when a store is opened,
never at import, because ``kuzu`` and ``ladybug`` cannot share a process. Writes are
serialised by a lock and run in explicit transactions; reads use one connection per
thread. The process holds the engine's file lock, so it is the store's only
writer (``sole_writer``): the engine answers recall from a working set in memory
(``smriti.index``), loaded through ``working_set_streams``; the reads here are its
native path (before the working set is loaded, above its budget, or with
``SMRITI_WORKING_SET=off``). What keeps every acknowledged memory on a full disk, and a
damaged file from opening as an empty store, is in ``durability``.
"""

from __future__ import annotations

import importlib
import importlib.util  # noqa: F401 - kuzu's parameter binding needs it imported
import os
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from smriti import get_logger
from smriti.backend import (
    BackendError,
    BackendOptions,
    StorageBackend,
    StorageFullError,
    StoreLockedError,
    VectorCache,
    WriteGate,
    private_dir,
)
from smriti_embedded_graph import durability, schema
from smriti_embedded_graph.codec import CUE_FIELDS, cue_from_row, vec_out
from smriti_embedded_graph.cooccurs import CoOccursMixin
from smriti_embedded_graph.erase import EraseMixin
from smriti_embedded_graph.queries import QueriesMixin
from smriti_embedded_graph.seek import SeekMixin
from smriti_embedded_graph.settings import BUFFER_MB, OLD_CACHE_MB, SETTINGS
from smriti_embedded_graph.writebehind import WriteBehindMixin
from smriti_embedded_graph.writes import WritesMixin

if TYPE_CHECKING:
    from smriti.backend import Cue

log = get_logger(__name__)
#: The largest a store may grow. Kùzu reserves this much address space per open store
#: (8 TB by default), so one process with many stores open (a team server with
#: SMRITI_OWNER=off) ran out of it after about 15; at 1 TB, over a hundred fit.
MAX_DB_BYTES = 1 << 40

#: Kùzu's default page buffer pool (``settings.BUFFER_MB``).
DEFAULT_BUFFER_MB = 0
#: The database file of each engine built on this library, and the engine's name: a
#: store of one is never opened as an empty store of the other.
ENGINE_FILES = {"memory.kuzu": ("Kùzu", "kuzu"), "memory.lbug": ("LadybugDB", "ladybug")}
#: Node offsets per chunk of an unordered read of a table (the working set's load).
OFFSET_CHUNK = 10_000


class EmbeddedGraphBackend(
    EraseMixin,
    CoOccursMixin,
    WriteBehindMixin,
    WritesMixin,
    SeekMixin,
    QueriesMixin,
    StorageBackend,
):
    """An embedded graph database (Kùzu or LadybugDB), one file per user; the store's
    only writer. Not registered itself: each engine's plugin subclasses it and sets the
    engine's traits below."""

    #: The driver module (``kuzu``, ``ladybug``), imported when a store is opened.
    driver_module: ClassVar[str]
    #: The distribution that provides the driver, named in the error when it is missing.
    driver_distribution: ClassVar[str]
    #: The engine's name in messages.
    engine: ClassVar[str]
    #: The database file in ``{STORAGE_LOCATION}/{user}/``.
    db_file: ClassVar[str]
    #: Files in a user's directory that show a store of this engine (``DB_TYPE=auto``).
    store_files: ClassVar[tuple[str, ...]] = ()
    #: Whether the engine ships its ``fts`` and ``vector`` extensions (loaded offline).
    #: Without them nothing is ever LOADed or INSTALLed: the working set answers
    #: recall, and the native path scans (BM25 over CONTAINS, exact vectors).
    native_extensions: ClassVar[bool] = False
    #: The format of ``EXPORT DATABASE`` that erasing deleted memories rebuilds from
    #: (``csv`` for Kùzu; LadybugDB exports only ``parquet``).
    export_format: ClassVar[str] = "csv"
    #: Further keyword arguments of the driver's ``Database`` for this engine.
    database_options: ClassVar[dict[str, Any]] = {}
    multi_tenant: ClassVar[bool] = False
    #: The engine locks its database file: one process per store (the others use the owner).
    single_process: ClassVar[bool] = True
    #: Nobody else writes the store while it is open: the engine keeps a working set.
    sole_writer = True
    declared_settings = SETTINGS

    def __init__(
        self,
        user: str,
        path: Path | str,
        buffer_mb: int = DEFAULT_BUFFER_MB,
        native_indexes: bool = False,
    ) -> None:
        super().__init__(user)
        self.path = Path(path)
        self.buffer_mb = buffer_mb
        #: Whether ``ensure_indexes`` builds Kùzu's full-text and HNSW indexes: only when
        #: no working set answers recall (an HNSW index costs 17 ms on every insert), and
        #: never on an engine without its extensions.
        self.native_indexes = native_indexes and self.native_extensions
        self._driver: ModuleType | None = None
        self._db: Any = None
        self._local = threading.local()
        self._conns: list[Any] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.RLock()
        #: Reads pass together; a commit or checkpoint passes alone. Kùzu 0.11.3
        #: checkpoints inside COMMIT (forced after a COPY or an index DDL) while holding
        #: the lock every transaction needs to end, so a read running meanwhile cannot
        #: finish, and after 5 s the commit fails ("Timeout waiting for active
        #: transactions"); several processes sharing one owner made that frequent.
        self._quiet = WriteGate()
        self._generation = 0
        #: The generation (open database) whose extensions are loaded.
        self._extensions = -1
        self._schema_epoch = 0
        #: Every cue without its embedding (in ``cue_cache``), by normalised name and by
        #: id: a cue is merged on its name, and Kùzu has no secondary index to find it.
        self.cue_cache = VectorCache()
        self.cues_by_key: dict[str, Cue] = {}
        self.cues_by_id: dict[str, Cue] = {}
        self._cues_lock = threading.RLock()
        #: The ids of every stored engram (queued ones included), loaded at open: a new
        #: memory's id and its edges' targets are checked without a Kùzu query (a join
        #: by ``UNWIND`` scans the whole table). None until loaded.
        self._engram_ids: set[str] | None = None
        #: The width of the stored embeddings (None while none is stored).
        self.dims: int | None = None
        self.vector_index_dims: int | None = None
        self._staging_ready = False
        self._pending = 0
        self._worker: ThreadPoolExecutor | None = None
        self._worker_lock = threading.Lock()
        #: The manifest as last read or written; None for a store made before them.
        self._manifest: durability.Manifest | None = None
        #: Whether the open passed the manifest's checks (only then is it updated).
        self._verified = False
        #: Whether a Kùzu read or write of its files failed (closing may then abort).
        self._kuzu_failed = False
        self._init_write_behind()

    @classmethod
    def from_options(cls, options: BackendOptions) -> EmbeddedGraphBackend:
        """The store in the user's directory, its buffer pool from ``BUFFER_MB``.

        Kùzu's own indexes are built only when no working set will answer recall
        (``options.working_set``)."""
        if options.get(OLD_CACHE_MB):
            log.warning(
                f"{OLD_CACHE_MB.env} is no longer used: the memory budget of every backend's "
                "working set is SMRITI_WORKING_SET_MB",
                value=options.get(OLD_CACHE_MB),
            )
        path = options.user_dir / cls.db_file
        backend = cls(options.user, path, buffer_mb=options.get(BUFFER_MB))
        backend.native_indexes = not options.working_set
        return backend

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Open (or create) the database, migrate it, load the cues and engram ids."""
        if self._db is not None:
            return
        self._driver = self.load_driver()
        if self.path.is_dir():
            raise BackendError(f"{self.path} is a directory, not a {self.engine} database file")
        self._refuse_other_engine()
        private_dir(self.path.parent)
        self._manifest = durability.read_manifest(self.path)
        durability.check_file(self.path, self._manifest)
        self.clear_erase_scratch()  # an erase cut short: its export holds the texts
        self._verified = self._kuzu_failed = self._replayed = False
        try:
            # Checkpoints are ours: an automatic one failing inside a commit leaves the
            # connection unusable and the process aborting at close (durability).
            self._db = self._driver.Database(
                str(self.path),
                buffer_pool_size=self.buffer_mb * 2**20,
                auto_checkpoint=False,
                max_db_size=MAX_DB_BYTES,
                **self.database_options,
            )
        except RuntimeError as exc:
            raise self._open_error(exc) from exc
        self._generation += 1
        try:
            self._prepare()
            durability.check_count(self.path, self._manifest, self._known_engrams())
        except BaseException:
            self.close()
            raise
        self._verified = True
        self._save_manifest()

    def _refuse_other_engine(self) -> None:
        """Refuse to start an empty store beside another engine's store: the memories
        are there, and this engine cannot read that file."""
        if self.path.exists():
            return
        for name, (engine, db_type) in ENGINE_FILES.items():
            if name != self.path.name and (self.path.parent / name).exists():
                raise BackendError(
                    f"{self.path.parent} holds a {engine} store ({name}), which "
                    f"{self.engine} cannot open. Move it with `smriti migrate --to "
                    f"{self.name}` (where {engine} does not install, with a Python that has "
                    f"it, e.g. `uvx --python 3.13 --from smriti-server smriti migrate --to "
                    f"{self.name}`), or set DB_TYPE={db_type}"
                )

    @classmethod
    def load_driver(cls) -> ModuleType:
        """The engine's driver module, imported now (never at plugin load: two engines'
        drivers cannot share a process)."""
        try:
            return importlib.import_module(cls.driver_module)
        except ImportError:
            raise BackendError(
                f"the {cls.engine} driver is not installed: pip install "
                f"{cls.driver_distribution} (or run `smriti migrate --to <engine>` where it "
                "installs, to move the store to an engine installed here)"
            ) from None

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

    def _prepare(self) -> None:
        conn = self._conn()
        with self._exclusive():
            applied = schema.migrate(conn)
        if applied:
            log.info("schema migrated", engine=self.engine, path=str(self.path), versions=applied)
        dims = self.get_meta("vector_index_dims")
        self.vector_index_dims = int(dims) if dims else None
        self._replay_journal()  # with the index known: replayed memories are indexed too
        self._load_cues()
        self._load_engram_ids()
        self._load_pending()
        self._drop_unused_text_index()

    def close(self) -> None:
        """Close every connection and the database; safe to call twice."""
        self._stop_writing()
        with self._write_lock, self._kuzu_lock:
            if self._db is not None:
                self._final_checkpoint()
        with self._write_lock, self._kuzu_lock, self._conns_lock:
            for conn in self._conns:
                if self._kuzu_failed:
                    durability.abandon(conn)
                    continue
                with suppress(Exception):  # best effort; closing the db below flushes
                    conn.close()
            self._conns.clear()
            self._drop_prepared()
            self._generation += 1
            if self._db is not None:
                self._close_database()
            self._forget_cues_and_ids()
        self._forget_queue()
        with self._worker_lock:
            if self._worker is not None:
                self._worker.shutdown(wait=True)
                self._worker = None

    def needs_reopen(self) -> bool:
        """After Kùzu failed to write its files it takes no more writes in this process;
        once the disk has room for the replay and a checkpoint, a new open recovers
        (the WAL and the journal are replayed)."""
        if not self._kuzu_failed:
            return False
        wal = self.path.with_name(self.path.name + ".wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        needed = durability.checkpoint_room(wal_bytes) + durability.STORE_RESERVE
        return durability.has_room(self.path, needed)

    def _final_checkpoint(self) -> None:
        """At close: checkpoint if there is room, else tell Kùzu not to try (the WAL and
        the journal are kept for the next open)."""
        if self._kuzu_failed:
            return
        try:
            if not self._checkpoint(force=True):
                self._conn().execute("CALL force_checkpoint_on_close=false")
        except Exception as exc:  # closing must not fail; the next open replays the WAL
            log.warning(
                "kuzu store closed without a checkpoint", path=str(self.path), error=str(exc)
            )

    def _close_database(self) -> None:
        """Close Kùzu's database, or, after a failed write of its files, abandon it:
        closing (or checkpointing) it then aborted or crashed the process (durability)."""
        db, self._db = self._db, None
        if self._kuzu_failed:
            durability.abandon(db)
            log.error(
                "kuzu store left unclosed after a failed write of its files; every "
                "committed memory is in its WAL, every stored one in the journal",
                path=str(self.path),
            )
            return
        db.close()

    # -- durability ---------------------------------------------------------------------
    def _check_room(self, needed: int, what: str) -> None:
        """Refuse (StorageFullError naming ``what``) a Kùzu write that might not fit,
        and any write after a failed one: Kùzu's state is then unsafe to write."""
        if self._kuzu_failed:
            raise durability.kuzu_failed(self.path, what)
        if not durability.has_room(self.path, durability.KUZU_RESERVE + needed):
            raise durability.disk_full(self.path, what)

    def _check_store_room(self, line: int) -> None:
        """Refuse a new memory (of a ``line``-byte journal line) the store cannot keep:
        with its journal line, Kùzu's WAL record and checkpoint beyond the reserve that
        lets the memories already journaled reach Kùzu."""
        what = "the memory was not stored"
        if self._kuzu_failed:
            raise durability.kuzu_failed(self.path, what)
        if not durability.has_room(self.path, durability.STORE_RESERVE + 3 * line):
            raise durability.disk_full(self.path, what)

    def _kuzu_error(self, exc: Exception, what: str) -> BackendError:
        """The error for a failed Kùzu statement (StorageFullError on a full disk)."""
        if durability.is_io_failure(exc):
            self._kuzu_failed = True
            if durability.is_full(exc) or not durability.has_room(
                self.path, durability.STORE_RESERVE
            ):
                return durability.disk_full(self.path, what)
        return BackendError(f"{what}: {exc}")

    def _known_engrams(self) -> int:
        """How many memories the store holds (the queued ones included)."""
        ids = self._engram_ids
        if ids is not None:
            return len(ids)
        while True:
            conn = self._conn()
            with self._quiet.shared():
                if self._current(conn):
                    return int(self._exec(conn, "MATCH (e:Engram) RETURN count(e)").get_all()[0][0])

    def _current(self, conn: Any) -> bool:
        """Whether ``conn`` (this thread's) is on the open database: an erase that rebuilt
        the file between making it and passing the quiet gate closed its database."""
        local = self._local  # replaced at a close or an erase's swap (_drop_prepared)
        return (
            conn is getattr(local, "conn", None)
            and getattr(local, "generation", None) == self._generation
        )

    def _save_manifest(self) -> None:
        """Raise (or lower) the manifest to the store's count and file size, once the
        open has passed its checks. A failure keeps the old manifest, a lower bound."""
        if not self._verified:
            return
        try:
            manifest = durability.Manifest(self._known_engrams(), self.db_size_hint())
            if manifest != self._manifest:
                durability.write_manifest(self.path, manifest)
                self._manifest = manifest
        except (OSError, RuntimeError, BackendError) as exc:
            log.warning("kuzu manifest not updated", path=str(self.path), error=str(exc))

    def _lower_manifest(self, deleting: int) -> None:
        """Before up to ``deleting`` memories are deleted: lower the manifest's count,
        so the smaller store still opens (nothing is deleted if this fails)."""
        old = self._manifest
        if old is None or deleting <= 0:
            return
        floor = max(0, min(old.engrams, self._known_engrams() - deleting))
        if floor == old.engrams:
            return
        manifest = durability.Manifest(floor, old.db_bytes)
        try:
            durability.write_manifest(self.path, manifest)
        except OSError as exc:
            raise durability.disk_full(self.path, "nothing was deleted") from exc
        self._manifest = manifest

    # -- connections and transactions ---------------------------------------------------
    def _conn(self) -> Any:
        """This thread's connection to the open database."""
        local = self._local
        if getattr(local, "generation", None) != self._generation or local.conn is None:
            if self._db is None:
                raise BackendError(f"the {self.engine} store {self.path} is not open")
            conn = self._driver.Connection(self._db)  # type: ignore[union-attr]
            # Once per database: extensions are loaded database-wide, and each LOAD
            # is a write transaction with a WAL record, which a full disk made fail
            # (and Kùzu unsafe) in a read on a new thread.
            with self._kuzu_lock:
                if self.native_extensions and self._extensions != self._generation:
                    for extension in ("fts", "vector"):
                        conn.execute(f"LOAD {extension}")
                    self._extensions = self._generation
            with self._conns_lock:
                self._conns.append(conn)
            local.conn, local.generation, local.prepared = conn, self._generation, {}
        return local.conn

    def _drop_prepared(self) -> None:
        """Drop every thread's connection and prepared statements: a prepared statement
        keeps its database mapped after both are closed (LadybugDB: 1 TB of address
        space each, so a process ran out after ~125 closed stores)."""
        self._local = threading.local()

    def _exec(self, conn: Any, query: str, params: dict[str, Any] | None = None) -> Any:
        """Execute through a per-thread prepared-statement cache.

        Preparing costs about 3 ms per statement in Kùzu 0.11, more than most of our
        executions; the cache is dropped whenever the schema or indexes change.
        """
        cache: dict[tuple[int, str], Any] = self._local.__dict__.setdefault("prepared", {})
        key = (self._schema_epoch, query)
        prepared = cache.get(key)
        if prepared is None:
            with warnings.catch_warnings():  # prepare() is "deprecated" but still the API
                warnings.simplefilter("ignore", DeprecationWarning)
                prepared = conn.prepare(query)
            if not prepared.is_success():
                raise RuntimeError(prepared.get_error_message())
            cache[key] = prepared
        return conn.execute(prepared, params or {})

    def _q(
        self, query: str, params: dict[str, Any] | None = None, lag_ok: bool = False
    ) -> list[list[Any]]:
        """Run a read query on this thread's connection and return all rows, after the
        queued memories are written (Kùzu must not lag a store that returned). With
        ``lag_ok``, a disk too full to write them does not stop the read (the caller
        adds them from the queue)."""
        try:
            self.write_queued()
        except StorageFullError as exc:
            if not lag_ok:
                raise
            log.warning("kuzu read before the stored memories could be written", error=str(exc))
        try:
            while True:
                conn = self._conn()  # first: making one may take the lock a checkpoint holds
                with self._quiet.shared():
                    if self._current(conn):
                        return self._exec(conn, query, params).get_all()
        except RuntimeError as exc:
            raise self._kuzu_error(exc, f"{self.engine} query failed on {self.path}") from exc

    def _by_offset(
        self,
        pattern: str,
        alias: str,
        returns: str,
        step: int = OFFSET_CHUNK,
        where: str = "",
        params: dict[str, Any] | None = None,
    ) -> Iterator[list[list[Any]]]:
        """Rows of ``MATCH pattern [WHERE where] RETURN returns`` in chunks of ``step``
        node offsets of ``alias`` (every node once: offsets are unique, holes of deleted
        nodes skipped), in no particular order.

        Kùzu materialises a whole result in its buffer pool, whose pages stay resident:
        one query over 100k engrams and their 1M links left ~650 MB there, chunks ~250.
        Keyset pages (``ORDER BY id`` per page) took 40 s over 100k engrams.
        """
        table = pattern.split(f"({alias}:", 1)[1].split(")", 1)[0]
        top = self._q(f"MATCH ({alias}:{table}) RETURN max(offset(id({alias})))")[0][0]
        if top is None:
            return
        chunk = f"offset(id({alias})) >= $lo AND offset(id({alias})) < $hi"
        condition = f"({where}) AND {chunk}" if where else chunk
        query = f"MATCH {pattern} WHERE {condition} RETURN {returns}"
        for lo in range(0, int(top) + 1, step):
            yield self._q(query, {**(params or {}), "lo": lo, "hi": lo + step})

    def _stream(self, query: str, params: dict[str, Any] | None = None) -> Iterator[list[Any]]:
        """Rows of a read query; fetched eagerly so the caller may query in between."""
        return iter(self._q(query, params))

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction at a time, after the queued memories; rolled back on
        any error."""
        with self._exclusive():
            self._check_room(0, "nothing was changed")
            conn = self._conn()
            with self._transaction(conn):
                yield conn
            self._commit(conn)
            self._checkpoint()

    @staticmethod
    @contextmanager
    def _transaction(conn: Any) -> Iterator[None]:
        """``BEGIN`` on ``conn``, rolled back on any error; the caller commits."""
        conn.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            with suppress(RuntimeError):  # Kùzu may have rolled back already
                conn.execute("ROLLBACK")
            raise

    def _commit(self, conn: Any) -> None:
        try:
            with self._quiet.exclusive():  # it may checkpoint: no read may be running
                conn.execute("COMMIT")
        except RuntimeError as exc:
            raise self._kuzu_error(exc, f"{self.engine} commit failed on {self.path}") from exc

    def _reload_caches(self) -> None:
        """Read the cues and engram ids from the store again (after a failed update)."""
        self._forget_cues_and_ids()
        self._load_cues()
        self._load_engram_ids()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except RuntimeError as exc:
            raise self._kuzu_error(exc, f"{self.engine} write failed on {self.path}") from exc

    # -- what the write path keeps in memory ----------------------------------------------
    def _load_cues(self) -> None:
        for rows in self._by_offset("(c:Cue)", "c", CUE_FIELDS):
            self.remember_cues(cue_from_row(r) for r in rows)

    def _load_engram_ids(self) -> None:
        """The ids of every engram (a few MB at 100k) and the embeddings' width."""
        ids: set[str] = set()
        # One collected list per chunk, not a row each: fetching a row reacquires the
        # interpreter lock, which the snapshot's preload holds meanwhile (5 ms a turn).
        for rows in self._by_offset("(e:Engram)", "e", "collect(e.id)", step=100_000):
            ids.update(rows[0][0])
        sample = self._q(
            "MATCH (e:Engram) WHERE e.embedding IS NOT NULL RETURN e.embedding LIMIT 1"
        )
        vector = vec_out(sample[0][0]) if sample else None
        self.dims = None if vector is None else int(vector.shape[0])
        self._engram_ids = ids

    def _forget_cues_and_ids(self) -> None:
        with self._cues_lock:
            self.cue_cache.clear()
            self.cues_by_key.clear()
            self.cues_by_id.clear()
        self._engram_ids = None

    def db_size_hint(self) -> int:
        """Size of the database file in bytes (0 when missing)."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0
