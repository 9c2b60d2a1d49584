"""The embedded graph storage backend shared by Kùzu and LadybugDB: one database per user.

The two engines speak the same Cypher through the same Python API; a subclass names its
driver module, its file name and whether the engine has its full-text and vector
extensions (``EmbeddedGraphBackend``'s class attributes). The store lives at
``{STORAGE_LOCATION}/{user}/{db_file}``. The driver is imported when a store is opened,
never at import, because ``kuzu`` and ``ladybug`` cannot share a process. The process
holds the engine's file lock, so it is the store's only writer (``sole_writer``): the
engine answers recall from a working set in memory (``smriti.index``), loaded through
``working_set_streams``; the reads here are its native path (before the working set is
loaded, above its budget, or with ``SMRITI_WORKING_SET=off``).

The backend is a facade over collaborators, each given what it uses when it is made:

- ``store`` (``GraphStore``): the database, its connections, transactions, locks and
  what keeps every acknowledged memory on a full disk (``durability``);
- ``cues`` (``CueMap``): every cue and engram id, kept in memory;
- ``cooccurs`` (``CoOccurrences``): co-occurrence counts waiting to be folded;
- ``journal`` (``WriteBehind``): the journal of new memories, written to Kùzu behind
  the store, ahead of every other read and write;
- ``reader`` (``Reader``), ``writer`` (``Writer``, with ``RowWriter`` for new memories'
  rows), ``seeker`` (``Seeker``: ``seek`` and ``neighbourhood``) and ``eraser``
  (``Eraser``: ``erase_deleted``).

It opens and closes them in order and hands each contract method to one of them.
"""

from __future__ import annotations

import importlib
import importlib.util  # noqa: F401 - kuzu's parameter binding needs it imported
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from smriti import get_logger
from smriti.backend import (
    Association,
    BackendError,
    BackendOptions,
    CoOccurrence,
    Cue,
    Engram,
    EngramStats,
    EngramUpdate,
    Expand,
    Link,
    Listing,
    Neighbourhood,
    Seeds,
    Seek,
    StorageBackend,
    StoredMemory,
    private_dir,
)
from smriti_embedded_graph import durability, schema
from smriti_embedded_graph.cooccurs import CoOccurrences
from smriti_embedded_graph.cuemap import CueMap
from smriti_embedded_graph.erase import Eraser
from smriti_embedded_graph.queries import Reader
from smriti_embedded_graph.rows import RowWriter
from smriti_embedded_graph.seek import Seeker
from smriti_embedded_graph.settings import BUFFER_MB, OLD_CACHE_MB, SETTINGS
from smriti_embedded_graph.store import GraphStore
from smriti_embedded_graph.writebehind import WriteBehind
from smriti_embedded_graph.writes import Writer

log = get_logger(__name__)

#: Kùzu's default page buffer pool (``settings.BUFFER_MB``).
DEFAULT_BUFFER_MB = 0
#: The database file of each engine built on this library, and the engine's name: a
#: store of one is never opened as an empty store of the other.
ENGINE_FILES = {"memory.kuzu": ("Kùzu", "kuzu"), "memory.lbug": ("LadybugDB", "ladybug")}


class EmbeddedGraphBackend(StorageBackend):
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
        self.cues = CueMap()
        self.store = GraphStore(
            self.path,
            self.engine,
            self.cues,
            native_extensions=self.native_extensions,
            buffer_mb=buffer_mb,
            database_options=self.database_options,
        )
        self.cooccurs = CoOccurrences(self.store, self.cues)
        rows = RowWriter(self.store, self.cues)
        self.journal = WriteBehind(self.store, rows, self.cooccurs)
        self.reader = Reader(self.store, self.cues, self.journal)
        # Kùzu's own full-text and HNSW indexes only when no working set answers recall
        # (an HNSW index costs 17 ms on every insert), never without the extensions.
        self.writer = Writer(
            self.store,
            self.cues,
            self.journal,
            rows,
            self.reader,
            native_indexes=native_indexes and self.native_extensions,
        )
        self.seeker = Seeker(self.reader)
        self.eraser = Eraser(self.store, self.cues, self.journal, self.export_format)

    @property
    def native_indexes(self) -> bool:
        """Whether ``ensure_indexes`` builds Kùzu's full-text and HNSW indexes."""
        return self.writer.native_indexes

    @native_indexes.setter
    def native_indexes(self, value: bool) -> None:
        self.writer.native_indexes = value

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
        store = self.store
        if store.db is not None:
            return
        driver = self.load_driver()
        if self.path.is_dir():
            raise BackendError(f"{self.path} is a directory, not a {self.engine} database file")
        self._refuse_other_engine()
        private_dir(self.path.parent)
        store.manifest = durability.read_manifest(self.path)
        durability.check_file(self.path, store.manifest)
        self.eraser.clear_erase_scratch()  # an erase cut short: its export holds the texts
        store.verified = store.kuzu_failed = self.journal.replayed = False
        store.open_database(driver)
        try:
            self._prepare()
            durability.check_count(self.path, store.manifest, store.known_engrams())
        except BaseException:
            self.close()
            raise
        store.verified = True
        store.save_manifest()

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

    def _prepare(self) -> None:
        conn = self.store.conn()
        with self.journal.exclusive():
            applied = schema.migrate(conn)
        if applied:
            log.info("schema migrated", engine=self.engine, path=str(self.path), versions=applied)
        dims = self.reader.get_meta("vector_index_dims")
        self.store.vector_index_dims = int(dims) if dims else None
        self.journal.replay_journal()  # with the index known: replayed memories are indexed
        self.reader.load_cue_map()
        count = self.journal.query("MATCH (p:CoOccursQueue) RETURN count(p)")
        self.cooccurs.pending = int(count[0][0])
        self.writer.drop_unused_text_index()

    def close(self) -> None:
        """Close every connection and the database; safe to call twice."""
        store = self.store
        self.journal.stop_writing()
        with store.write_lock, store.kuzu_lock:
            if store.db is not None:
                self._final_checkpoint()
        with store.write_lock, store.kuzu_lock:
            store.close_connections()
            self.cues.clear()
        self.journal.forget_queue()
        self.writer.shutdown_worker()

    def needs_reopen(self) -> bool:
        """After Kùzu failed to write its files it takes no more writes in this process;
        once the disk has room for the replay and a checkpoint, a new open recovers
        (the WAL and the journal are replayed)."""
        return self.store.needs_reopen()

    def _final_checkpoint(self) -> None:
        """At close: checkpoint if there is room, else tell Kùzu not to try (the WAL and
        the journal are kept for the next open)."""
        if self.store.kuzu_failed:
            return
        try:
            if not self.journal.checkpoint(force=True):
                self.store.conn().execute("CALL force_checkpoint_on_close=false")
        except Exception as exc:  # closing must not fail; the next open replays the WAL
            log.warning(
                "kuzu store closed without a checkpoint", path=str(self.path), error=str(exc)
            )

    def db_size_hint(self) -> int:
        """Size of the database file in bytes (0 when missing)."""
        return self.store.db_size_hint()

    # -- writes (``writer``, ``eraser``) ---------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        self.writer.set_meta(key, value)

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Kùzu's full-text and HNSW indexes, when ``native_indexes`` (see ``Writer``)."""
        return self.writer.ensure_indexes(dims, min_engrams)

    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Store one memory atomically (see StorageBackend.add_memory): journaled now,
        written to Kùzu in the background (``writebehind``)."""
        return self.writer.add_memory(engram, cues, associations)

    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply partial updates (see ``Writer.update_engrams``)."""
        self.writer.update_engrams(updates)

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams with their edges; returns how many existed."""
        return self.writer.delete_engrams(ids)

    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy, with their CoOccurs edges."""
        return self.writer.delete_orphan_cues()

    def erase_deleted(self) -> int:
        """Rebuild the store's files from their live rows (see ``Eraser``)."""
        return self.eraser.erase_deleted()

    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records with their ids, in one transaction; existing ids replaced."""
        self.writer.import_records(engrams, cues, links, associations, cooccurrences)

    # -- reads (``reader``, ``seeker``) ----------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value, or None."""
        return self.reader.get_meta(key)

    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The engrams with these ids (with their embeddings); unknown ids skipped."""
        return self.reader.get_engrams(ids, embeddings)

    def list_page(self, listing: Listing) -> list[Engram]:
        """A filtered page in listing order (``smriti.backend.Listing``)."""
        return self.reader.list_page(listing)

    def count_engrams(self) -> int:
        """How many engrams this store holds (counted in memory)."""
        return self.reader.count_engrams()

    def counts(self) -> dict[str, int]:
        """Counts of engrams, cues and the three edge kinds."""
        return self.reader.counts()

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields."""
        return self.reader.engram_stats()

    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues whose normalised name is in ``names``, with embeddings."""
        return self.reader.get_cues(names)

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Stored cues with these ids, with embeddings; unknown skipped."""
        return self.reader.get_cues_by_id(ids)

    def seek(self, query: Seek) -> Seeds:
        """A recall's direct hits on every channel (see ``StorageBackend.seek``)."""
        return self.seeker.seek(query)

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        """Up to ``k`` engram ids by cosine, each scoring at least ``min_score``."""
        return self.reader.vector_search_above(embedding, k, min_score)

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` (see ``StorageBackend.neighbourhood``)."""
        return self.seeker.neighbourhood(query)

    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, in id order."""
        return self.reader.iter_engrams(batch_size)

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding."""
        return self.reader.iter_cues()

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge."""
        return self.reader.iter_links()

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge."""
        return self.reader.iter_associations()

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge (pending counts folded first)."""
        return self.reader.iter_cooccurrences()

    def working_set_streams(
        self,
    ) -> tuple[Iterable[Cue], Iterable[Engram], Iterable[Link], Iterable[Association]]:
        """Cues from memory; engrams, links and associations in chunks of node offsets."""
        return self.reader.working_set_streams()
