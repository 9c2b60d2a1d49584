"""The reference storage backend: one SQLite file per user, standard library only.

The store lives at ``{STORAGE_LOCATION}/{user}/smriti.sqlite3``: users are isolated by
file, and the user name is validated before it becomes part of a path. The file is in
WAL mode with ``synchronous=FULL``, so a write acknowledged by a method is on disk, and
each write method is one ``BEGIN IMMEDIATE`` transaction: all of it or nothing.

The backend holds three collaborators and hands each call to one of them: the
``Database`` (``database``: per-thread connections, transactions, errors), a ``Reader``
(``reads``) and a ``Writer`` (``writes``), both using that database. Reads that take
several statements run in one read transaction (a consistent snapshot) and never wait
for a writer; writes of this process are serialised by a lock, and those of other
processes by SQLite's file lock, so several processes may open the same store.
Searches are computed in Python: exact cosine over in-process vector tables
(``vectors``) and BM25 over a postings table (``lexical``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

from smriti.backend import (
    Association,
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
    validate_user,
)
from smriti.default_plugins.sqlite.database import Database
from smriti.default_plugins.sqlite.reads import Reader
from smriti.default_plugins.sqlite.vectors import VectorTable
from smriti.default_plugins.sqlite.writes import Writer

DB_FILE = "smriti.sqlite3"


class SqliteBackend(StorageBackend):
    """SQLite (standard library) store per user; exact vector and BM25 search in process."""

    name: ClassVar[str] = "sqlite"
    description: ClassVar[str] = "SQLite file per user (standard library), the reference backend"
    multi_tenant: ClassVar[bool] = False
    #: SQLite locks per transaction, not per open: several processes may share a store.
    single_process: ClassVar[bool] = False

    def __init__(self, user: str, path: Path | str) -> None:
        super().__init__(validate_user(user, "user"))
        self.path = Path(path)
        self.db = Database(self.path)
        self.engram_vectors = VectorTable("engram", typed=True)
        self.cue_vectors = VectorTable("cue", typed=False)
        self._reader = Reader(self.db, self.engram_vectors, self.cue_vectors)
        self._writer = Writer(self.db)

    @classmethod
    def from_options(cls, options: BackendOptions) -> SqliteBackend:
        """The store of the user in their directory under ``STORAGE_LOCATION``."""
        return cls(options.user, options.user_dir / DB_FILE)

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Open (or create) the file and migrate it; refuse a file that is not ours."""
        self.db.open()

    def close(self) -> None:
        """Close every thread's connection and drop the vector tables; safe to call twice."""
        self.db.close()
        self.engram_vectors.clear()
        self.cue_vectors.clear()

    # -- writes (``Writer``) ------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        self._writer.set_meta(key, value)

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Nothing to create (see ``Writer.ensure_indexes``)."""
        return self._writer.ensure_indexes(dims, min_engrams)

    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Store one memory atomically (see StorageBackend.add_memory)."""
        return self._writer.add_memory(engram, cues, associations)

    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply partial updates in one transaction; unknown ids are ignored."""
        self._writer.update_engrams(updates)

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams with their links, associations and postings."""
        return self._writer.delete_engrams(ids)

    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy; their CoOccurs edges go with them."""
        return self._writer.delete_orphan_cues()

    def erase_deleted(self) -> int:
        """Drop the orphaned cues and truncate the WAL (see ``Writer.erase_deleted``)."""
        return self._writer.erase_deleted()

    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records as given, in one transaction (see ``Writer.import_records``)."""
        self._writer.import_records(engrams, cues, links, associations, cooccurrences)

    # -- reads (``Reader``) -------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value, or None."""
        return self._reader.get_meta(key)

    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The engrams with these ids (always with their embeddings); unknown skipped."""
        return self._reader.get_engrams(ids, embeddings)

    def list_page(self, listing: Listing) -> list[Engram]:
        """A filtered page in listing order (see StorageBackend.list_page)."""
        return self._reader.list_page(listing)

    def count_engrams(self) -> int:
        """How many engrams this user has."""
        return self._reader.count_engrams()

    def counts(self) -> dict[str, int]:
        """Counts of engrams, cues and the three edge kinds, from one snapshot."""
        return self._reader.counts()

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields, in pages ordered by id."""
        return self._reader.engram_stats()

    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues whose normalised name is in ``names`` (one per name)."""
        return self._reader.get_cues(names)

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Stored cues with these ids, with embeddings; unknown skipped."""
        return self._reader.get_cues_by_id(ids)

    def seek(self, query: Seek) -> Seeds:
        """Direct hits on every channel in one snapshot (see StorageBackend.seek)."""
        return self._reader.seek(query)

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` in one snapshot (see StorageBackend.neighbourhood)."""
        return self._reader.neighbourhood(query)

    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id."""
        return self._reader.iter_engrams(batch_size)

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, ordered by id."""
        return self._reader.iter_cues()

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge, ordered by (engram id, cue id)."""
        return self._reader.iter_links()

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge, ordered by (source id, target id)."""
        return self._reader.iter_associations()

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge, ordered by (source id, target id)."""
        return self._reader.iter_cooccurrences()
