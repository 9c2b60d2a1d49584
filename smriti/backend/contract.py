"""The storage contract every backend implements.

A backend instance serves exactly one user (``user``): every read and write it does is
scoped to that user, whether the backend isolates users by directory, database, graph or
a ``user`` property. The engine never sees another user's data through it.

Methods may be called from several threads at once; a backend serialises what its
database cannot do concurrently. Every query is parameterised: user text never becomes
query text.

Vector scores are cosine similarities (higher is better); text scores are relevance
scores (higher is better, any scale). ``memory_type`` filters, where accepted, are
applied before the ``k`` cut.

Every field of an ``Engram`` round-trips through every write and read (``add_memory``,
``import_records``, ``get_engrams``, ``list_page``, ``iter_engrams``, the working-set
streams), the version fields included: ``supersedes`` is written once with the engram,
``superseded_by``/``superseded_at`` by ``update_engrams``; the origin fields
(``origin``, ``principal``) are written once with the engram and never updated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from smriti.backend import derived
from smriti.backend.helpers import joined
from smriti.backend.reads import Expand, Listing, Neighbourhood, Seeds, Seek
from smriti.model import Association, CoOccurrence, Cue, Engram, EngramUpdate, Link

if TYPE_CHECKING:
    from smriti.backend.options import BackendOptions
    from smriti.config import Settings
    from smriti.setting import Setting


@dataclass(slots=True, frozen=True)
class EngramStats:
    """The fields consolidation needs, without content or embedding."""

    id: str
    importance: float
    access_count: int
    last_accessed_at: datetime
    decay_factor: float
    cluster_id: int


@dataclass(slots=True)
class StoredMemory:
    """What ``add_memory`` stored: the engram and the cues as they are in the store."""

    engram: Engram
    cues: list[Cue]
    #: AssociatedWith edges passed in (a backend may leave it 0: the engine counts the
    #: edges it passed).
    associations: int = 0


class StorageBackend(ABC):
    """Base class of storage backends; register subclasses with ``register_storage_backends``.

    Lifecycle: ``from_options`` (the engine's; ``from_settings`` for scripts and
    tests) → ``open`` → any other method → ``close``.

    Sixteen methods are required: the classmethod that builds an instance, ``open``,
    ``close``, metadata (``get_meta``, ``set_meta``), the writes (``add_memory``,
    ``update_engrams``, ``delete_engrams``, ``delete_orphan_cues``,
    ``import_records``), recall's ``seek`` and the five ``iter_*`` streams. Every
    other method has a correct default built from those (``smriti.backend.derived``),
    which a backend overrides where it can answer faster (``get_engrams``,
    ``list_page`` and ``neighbourhood`` are on recall's path; ``counts`` and
    ``count_engrams`` on every status call).
    """

    #: The ``DB_TYPE`` value that selects this backend.
    name: ClassVar[str]
    #: Other ``DB_TYPE`` values accepted for it (e.g. ``ladybug``).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: One line for ``smriti plugins``.
    description: ClassVar[str] = ""
    #: True when several users share one database and are separated by a property.
    #: Backends whose isolation is configurable may set it per instance.
    multi_tenant: bool = False
    #: True when only one process at a time can open a store (an embedded database
    #: holding a file lock). Every Smriti process of the user then reaches the store
    #: through one owner process (``smriti.owner``) unless ``SMRITI_OWNER=off``.
    single_process: ClassVar[bool] = False
    #: True when nothing but this process writes the store while it is open (an
    #: embedded database it holds locked). The engine then answers reads from a working
    #: set in memory (``smriti.index``) and applies every write to it; with
    #: ``SMRITI_WORKING_SET=on`` it does so for any backend (one Smriti server as the
    #: only writer of a Neo4j or FalkorDB database).
    sole_writer: bool = False
    #: Files in ``{STORAGE_LOCATION}/{user}/`` that show a store of this backend: under
    #: ``DB_TYPE=auto`` a store keeps the installed backend whose files are there.
    store_files: ClassVar[tuple[str, ...]] = ()
    #: How much ``DB_TYPE=auto`` prefers this backend for a new store (the highest
    #: installed wins); 0 = never chosen automatically.
    preference: ClassVar[int] = 0
    #: The settings (environment variables) this backend reads: validated at startup,
    #: listed by ``smriti doctor`` and the settings reference, and passed to
    #: ``from_options`` as values (``BackendOptions.settings``).
    declared_settings: ClassVar[tuple[Setting[Any], ...]] = ()

    def __init__(self, user: str) -> None:
        self.user = user

    @classmethod
    @abstractmethod
    def from_options(cls, options: BackendOptions) -> StorageBackend:
        """Build an unopened backend from what the engine tells it: the user, the
        user's directory, whether a working set fronts it, its settings' values."""

    @classmethod
    def from_settings(cls, settings: Settings, user: str) -> StorageBackend:
        """An unopened backend for ``user`` with the options the engine would pass
        (``BackendOptions.from_settings``): for scripts and tests."""
        from smriti.backend.options import BackendOptions

        return cls.from_options(BackendOptions.from_settings(cls, settings, user))

    # -- lifecycle -------------------------------------------------------------------
    @abstractmethod
    def open(self) -> None:
        """Connect or open the store and run idempotent schema migrations.

        Raises BackendError (StoreLockedError when another process holds it) with a
        message naming the location or address.
        """

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store; safe to call twice."""

    def __enter__(self) -> StorageBackend:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def needs_reopen(self) -> bool:
        """True when the open store has become unusable in this process and opening it
        again now would help: an embedded database whose writes failed on a full disk
        that has room again. A Smriti owner process then makes way for a fresh one,
        which its clients reach without an error."""
        return False

    # -- metadata ----------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value (schema version, embedding model, Leiden state)."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Create vector and full-text indexes when the store holds > ``min_engrams``.

        ``dims`` is the embedding dimension. Idempotent and cheap when the indexes
        exist. Returns the names of indexes created by this call. The default creates
        none, for a backend whose searches need no index.
        """
        return []

    # -- writes ------------------------------------------------------------------------
    @abstractmethod
    def add_memory(
        self,
        engram: Engram,
        cues: Sequence[Cue],
        associations: Sequence[Association],
    ) -> StoredMemory:
        """Store one memory atomically: all of it or, on failure, none of it.

        An engram id that already exists is a retry when the content is the same (then
        nothing changes) and a BackendError otherwise. Writes the engram; merges each
        cue on its normalised name (an existing cue keeps its id
        and embedding, a new one is created); one EncodedBy edge per distinct cue
        (strength 1.0); CoOccurs edges between every pair of this memory's cues, both
        directions, strength incremented by 1 when the edge exists; and the given
        AssociatedWith edges from ``engram.id``, skipping targets that no longer exist.
        Returns the engram and the cues as stored (existing ids for merged cues).
        """

    @abstractmethod
    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply partial updates in batches; unknown ids are ignored.

        Every non-None field of an update is written: access count and time, decay,
        cluster, importance, the whole tag list (``tags``; the lexical index then sees
        the new tags) and ``superseded_by``/``superseded_at``.
        """

    def strengthen_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Recall's access strengthening (new access counts, times and decay factors).

        The default is ``update_engrams``. A backend may persist these after returning,
        as the Kùzu backend does on a background thread, provided every read through
        the backend sees the new values at once and ``close`` persists them: a crash
        before then loses only these access updates, never a memory.
        """
        self.update_engrams(updates)

    @abstractmethod
    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams and every edge touching them; returns how many existed."""

    @abstractmethod
    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy (and their CoOccurs edges); return count."""

    def erase_deleted(self) -> int:
        """Drop the cues no engram is EncodedBy (with their CoOccurs edges), then make
        what deleted engrams and cues held unreadable in this store's files; returns
        how many cues were dropped.

        The engine calls this after a forget, a purge or a purging correction, before
        the call returns. An embedded backend rewrites whatever may still hold the
        deleted bytes: its journal, write-ahead log and the free pages of its database
        file (the Kùzu backend rebuilds the file; the SQLite backend has
        ``secure_delete`` on and truncates its WAL). Raises BackendError when it cannot
        (the memories stay deleted). The default only drops the cues
        (``delete_orphan_cues``): a server backend's files belong to the server (the
        docs/storage.md, "Forget erases", says what Neo4j and FalkorDB keep).
        """
        return self.delete_orphan_cues()

    @abstractmethod
    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records exactly as given (ids kept), for import and benchmarks.

        Edges may refer to engrams or cues loaded by an earlier call. Engrams or cues
        whose id already exists are replaced.
        """

    # -- reads -------------------------------------------------------------------------
    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The engrams with these ids, in any order; unknown skipped.

        With ``embeddings`` (the default) each comes with its embedding; without, a
        backend may leave ``embedding`` None and save reading and sending the vectors
        (recall asks for them only for its candidate pool, to score every candidate by
        its exact cosine). The default scans ``iter_engrams``.
        """
        return derived.engrams_with_ids(self.iter_engrams(), ids)

    def list_page(self, listing: Listing) -> list[Engram]:
        """Up to ``listing.limit`` engrams (with embeddings) passing its filters, strictly
        after ``listing.after``, in listing order (``smriti.backend.Listing``): last access
        descending, then creation descending, then id descending.

        Filters are applied before the limit. ``after`` compares against the values
        exactly as this backend returns them, so a page's last engram, fed back, never
        reappears. ``smriti.backend.listing_sorted`` is the reference semantics, and the
        default applies it to ``iter_engrams``.
        """
        return derived.listing_page(self.iter_engrams(), listing)

    def count_engrams(self) -> int:
        """How many engrams this user has. The default counts ``engram_stats``."""
        return sum(1 for _ in self.engram_stats())

    def counts(self) -> dict[str, int]:
        """Counts of ``engrams``, ``cues``, ``links``, ``associations``, ``cooccurrences``.
        The default counts the streams."""
        return {
            "engrams": self.count_engrams(),
            "cues": sum(1 for _ in self.iter_cues()),
            "links": sum(1 for _ in self.iter_links()),
            "associations": sum(1 for _ in self.iter_associations()),
            "cooccurrences": sum(1 for _ in self.iter_cooccurrences()),
        }

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields, streamed. The default reads them from
        ``iter_engrams``; a backend overrides it to leave content and embeddings unread."""
        for e in self.iter_engrams():
            yield EngramStats(
                e.id, e.importance, e.access_count, e.last_accessed_at, e.decay_factor, e.cluster_id
            )

    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues whose (normalised) name is in ``names``, with embeddings, one per
        name. The default scans ``iter_cues``."""
        return derived.cues_named(self.iter_cues(), names)

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Stored cues with these ids, in any order, unknown skipped; embeddings may be
        None. For reading one memory (``smriti_manage action=get``), so rare: the default
        scans ``iter_cues``, and a backend overrides it with a lookup."""
        wanted = set(ids)
        return [c for c in self.iter_cues() if c.id in wanted] if wanted else []

    @abstractmethod
    def seek(self, query: Seek) -> Seeds:
        """A recall's direct hits on every channel in one round trip (``smriti.backend.reads``).

        ``vector`` and ``text`` hold up to ``query.k`` (engram id, score) pairs of
        ``query.memory_type`` (any type when None), best first: cosine similarity of at
        least ``query.vector_floor``, and lexical relevance (any positive scale; [] when
        nothing matches). ``cues`` holds each stored cue whose name is in
        ``query.cue_names`` (similarity 1.0) or that is among the
        ``query.cue_neighbours`` nearest cues of a row of ``query.cue_vectors`` with a
        similarity of at least ``query.cue_similarity`` (the best one counts), each with
        its degree and up to ``query.cue_fanout`` engrams, most important first (ties by
        id). ``total`` is the engram count (it only weights cues, so a shared server may
        answer with a count a few seconds old). Skipped channels come back empty.
        """

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        """Top-``k`` engram ids with cosine similarity of at least ``min_score``, best first.

        The store pipeline's association search calls this. The default asks ``seek``;
        a backend with a cheaper vector-only path overrides it, with the same result.
        """
        return self.seek(Seek(k=k, vector=embedding, vector_floor=min_score)).vector

    def nearest_engrams(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[Engram, float]]:
        """``vector_search_above`` with the engrams found: (engram, cosine), best first.

        The store pipeline's one read before it writes: the duplicate and conflict checks
        read the hits' content and version fields, the association search the strongest
        one's cluster. The engrams may come without embeddings. The default runs
        ``vector_search_above`` and then ``get_engrams``; a server backend overrides it to
        answer in one round trip, with the same result (a hit deleted between the search
        and the read is left out).
        """
        hits = self.vector_search_above(embedding, k, min_score)
        if not hits:
            return []
        return joined(hits, self.get_engrams([i for i, _ in hits], embeddings=False))

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` in one round trip (``smriti.backend.reads``).

        ``associations``: AssociatedWith edges touching the ids in either direction,
        up to ``query.edges`` strongest per engram and direction. ``links``: every
        EncodedBy edge of the ids; ``degrees``: the degree of each of their cues;
        ``members``: for the cues with a degree of at most ``query.cue_max_degree``,
        up to ``query.engrams_per_cue`` (engram id, strength), most important first
        (ties by id). Unknown ids contribute nothing. The default reads
        ``engram_stats``, ``iter_links`` and (when ``query.edges``) ``iter_associations``.
        """
        importance = {s.id: s.importance for s in self.engram_stats()}
        return derived.neighbourhood(query, importance, self.iter_associations(), self.iter_links())

    # -- streams for consolidation, export and backup -------------------------------------
    @abstractmethod
    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id."""

    @abstractmethod
    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, ordered by id."""

    @abstractmethod
    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge."""

    @abstractmethod
    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge."""

    @abstractmethod
    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge."""

    def working_set_streams(
        self,
    ) -> tuple[Iterable[Cue], Iterable[Engram], Iterable[Link], Iterable[Association]]:
        """Every cue, engram (with embedding), link and association, in any order, for
        loading a working set (``smriti.index``); consumed in that order.

        The default is the ``iter_*`` streams; a backend with a faster unordered read
        of its tables overrides it.
        """
        return (
            self.iter_cues(),
            self.iter_engrams(2000),
            self.iter_links(),
            self.iter_associations(),
        )
