"""One user's working set: what recall reads, held in memory and kept current.

It holds the engrams (rows and unit vectors), the cues (names, vectors), EncodedBy and
AssociatedWith adjacency, the lexical index and the listing order, and answers the
storage contract's reads (``seek``, ``neighbourhood``, ``get_engrams``, ...) exactly as
the backend would, in microseconds instead of a query each. It is authoritative only
while nothing but this process writes the store, which is why ``IndexedBackend`` uses
it only for backends that are their store's only writer, and applies every write to it
after the backend committed.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime

import numpy as np

from smriti.backend import (
    Association,
    Cue,
    CueMatch,
    Engram,
    EngramStats,
    EngramUpdate,
    Expand,
    Link,
    Listing,
    Neighbourhood,
    Seeds,
    Seek,
    StoredMemory,
    VectorCache,
    normalise_cue_name,
    origin_matches,
    utcnow,
)
from smriti.index.graph import POS, Facets, Graph, utc
from smriti.index.recency import RecencyOrder, order_key

#: The EngramUpdate fields, in the order they are applied.
UPDATED = (
    "access_count", "last_accessed_at", "decay_factor", "cluster_id", "importance", "tags",
    "superseded_by", "superseded_at",
)  # fmt: skip


class WorkingSet:
    """The in-memory structures recall reads; see the module docstring.

    Writes take ``lock``; reads take it where they touch more than one structure.
    """

    def __init__(self, capacity: int = 64) -> None:
        self.lock = threading.RLock()
        self.graph = Graph()
        self.vectors = VectorCache(capacity)
        self.cue_vectors = VectorCache()
        self.cues_by_key: dict[str, Cue] = {}
        self.cues_by_id: dict[str, Cue] = {}
        self.labels: dict[str, int] = {}
        self.recency = RecencyOrder()

    def __len__(self) -> int:
        return len(self.graph.rows)

    def label(self, memory_type: str) -> int:
        """A small integer for a memory type (the vector and text filters' label)."""
        return self.labels.setdefault(memory_type, len(self.labels))

    def nbytes(self) -> int:
        """An estimate of the memory held, for the working-set budget."""
        dims = self.vectors.dims or 0
        graph = self.graph
        packed = graph.e2c.total() + graph.out.total()
        return (
            len(graph.rows) * (dims * 5 + 900)
            + len(self.cues_by_id) * (dims * 4 + 300)
            + packed * 40  # both directions, as arrays
            + graph.unpacked() * 110
        )

    # -- loading ------------------------------------------------------------------------
    def load(
        self,
        cues: Iterable[Cue],
        engrams: Iterable[Engram],
        links: Iterable[Link],
        associations: Iterable[Association],
    ) -> None:
        """Fill an empty working set from a store's streams (in this order).

        The edges are packed as they arrive (``Graph.adopt_edges``): a million links
        held as dicts would take ~200 bytes each."""
        self.put_cues(cues)
        batch: list[Engram] = []
        for e in engrams:
            batch.append(e)
            if len(batch) >= 2000:
                self.put_engrams(batch, ordered=False)
                batch = []
        self.put_engrams(batch, ordered=False)
        with self.lock:
            rows = self.graph.rows
            self.recency.load(
                order_key(k, r[POS["last_accessed_at"]], r[POS["created_at"]])  # type: ignore[arg-type]
                for k, r in rows.items()
            )
            ids = [r[-1] for r in rows.values()]  # the rows' own key objects
            cue_keys = list(self.cues_by_id)
            slots = {k: i for i, k in enumerate(ids)}
            packed_links = _pack_links(links, slots, {c: i for i, c in enumerate(cue_keys)})
            packed_edges, relations = _pack_associations(associations, slots)
            self.graph.adopt_edges(ids, slots, cue_keys, packed_links, packed_edges, relations)
        self.graph.rank_hubs()

    # -- changes (after the backend committed them) ------------------------------------
    def put_cues(self, cues: Iterable[Cue]) -> None:
        """Insert or replace cues (by id; the name map follows)."""
        with self.lock:
            rows = []
            for cue in cues:
                old = self.cues_by_id.get(cue.id)
                if old is not None:
                    self.cues_by_key.pop(normalise_cue_name(old.name), None)
                bare = Cue(cue.id, cue.name, cue.cue_type)
                self.cues_by_id[cue.id] = bare
                self.cues_by_key[normalise_cue_name(cue.name)] = bare
                if cue.embedding is not None:
                    rows.append((cue.id, cue.embedding, 0))
            if rows:
                self.cue_vectors.put_many(rows)

    def put_engrams(self, engrams: Sequence[Engram], ordered: bool = True) -> None:
        """Insert or replace engram rows and vectors (and their place in the listing
        order, unless ``ordered`` is False: ``load`` sorts once at the end)."""
        if not engrams:
            return
        with self.lock:
            vectors = []
            for e in engrams:
                label = self.label(e.memory_type)
                self.graph.put_engram(e, label)
                if e.embedding is not None:
                    vectors.append((e.id, e.embedding, label))
                else:
                    self.vectors.remove([e.id])
                if ordered:
                    self.recency.put(order_key(e.id, e.last_accessed_at, e.created_at))
            if vectors:
                self.vectors.put_many(vectors)

    def put_memory(self, stored: StoredMemory, associations: Sequence[Association]) -> None:
        """A memory ``add_memory`` stored, with the associations it was given."""
        with self.lock:
            self.put_cues(c for c in stored.cues if c.id not in self.cues_by_id)
            self.put_engrams([stored.engram])
            engram_id = stored.engram.id
            self.graph.put_links((engram_id, c.id, 1.0) for c in stored.cues)
            own = [a for a in associations if a.source_id == engram_id]
            self.graph.put_associations(own, undated=utcnow())

    def put_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
    ) -> None:
        """Records ``import_records`` loaded."""
        with self.lock:
            self.put_cues(cues)
            self.put_engrams(engrams)
            known = self.cues_by_id
            self.graph.put_links(
                (lk.engram_id, lk.cue_id, float(lk.strength)) for lk in links if lk.cue_id in known
            )
            self.graph.put_associations(associations, undated=utcnow())

    def update(self, updates: Sequence[EngramUpdate]) -> None:
        """Partial updates (unknown ids are ignored)."""
        with self.lock:
            rows = self.graph.rows
            for u in updates:
                row = rows.get(u.id)
                if row is None:
                    continue
                for name in UPDATED:
                    value = getattr(u, name)
                    if value is not None:
                        self.graph.update(u.id, name, value)
                if u.last_accessed_at is not None:
                    self.recency.put(
                        order_key(u.id, row[POS["last_accessed_at"]], row[POS["created_at"]])  # type: ignore[arg-type]
                    )

    def remove_engrams(self, ids: Iterable[str]) -> None:
        """Deleted engrams and every edge touching them."""
        with self.lock:
            ids = list(ids)
            self.graph.remove_engrams(ids)
            self.vectors.remove(ids)
            for engram_id in ids:
                self.recency.remove(engram_id)

    def remove_orphan_cues(self) -> None:
        """Drop the cues no engram is EncodedBy (``delete_orphan_cues`` deleted them)."""
        with self.lock:
            members = self.graph.c2e
            orphans = [c for c in self.cues_by_id if not members.size(c)]
            for cue_id in orphans:
                cue = self.cues_by_id.pop(cue_id)
                self.cues_by_key.pop(normalise_cue_name(cue.name), None)
            self.cue_vectors.remove(orphans)
            self.graph.remove_cues(orphans)

    # -- reads ----------------------------------------------------------------------------
    def seek(self, query: Seek) -> Seeds:
        """``StorageBackend.seek`` from memory."""
        seeds = Seeds(total=len(self.graph.rows))
        label = None if query.memory_type is None else self.labels.get(query.memory_type)
        typed_out = query.memory_type is not None and label is None  # no memory of that type
        if query.vector is not None and query.k > 0 and not typed_out:
            # The floor is applied after the top-k search: a low floor given to the int8
            # pre-scan would make it re-score most rows (a high one, as the association
            # search's, is what vector_search_above passes on).
            hits = self.vectors.search(query.vector, query.k, label)
            seeds.vector = [(i, s) for i, s in hits if s >= query.vector_floor]
        if query.text and query.k > 0 and not typed_out:
            with self.graph.lock:
                seeds.text = self.graph.text.search(query.text, query.k, label)
        matched = {}
        for name in query.cue_names:
            cue = self.cues_by_key.get(normalise_cue_name(name))
            if cue is not None:
                matched[cue.id] = 1.0
        for row in query.cue_vectors if query.cue_vectors is not None else ():
            for cue_id, sim in self.cue_vectors.search(row, query.cue_neighbours):
                if sim >= query.cue_similarity and matched.get(cue_id, -2.0) < sim:
                    matched[cue_id] = sim
        graph = self.graph
        seeds.cues = [
            CueMatch(
                c,
                matched[c],
                graph.degree(c),
                graph.engrams_for_cue(c, query.cue_fanout),
                self.cues_by_id[c].cue_type,
            )
            for c in sorted(matched)
            if c in self.cues_by_id
        ]
        return seeds

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """``StorageBackend.neighbourhood`` from memory."""
        ids = [i for i in dict.fromkeys(query.ids) if i in self.graph.rows]
        around = Neighbourhood()
        if not ids:
            return around
        graph = self.graph
        if query.edges > 0:
            around.associations = graph.associations_of(ids, query.edges)
        around.links = graph.links_of(ids)
        for cue_id in sorted({link.cue_id for link in around.links}):
            degree = around.degrees[cue_id] = graph.degree(cue_id)
            if degree <= query.cue_max_degree and query.engrams_per_cue > 0:
                around.members[cue_id] = graph.engrams_for_cue(cue_id, query.engrams_per_cue)
        return around

    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The engrams with these ids (unknown skipped), without their embeddings unless
        ``embeddings``."""
        vector = self.vectors.vector if embeddings else _no_vector
        with self.graph.lock:
            found = (self.graph.engram(i, vector(i)) for i in dict.fromkeys(ids))
            return [e for e in found if e is not None]

    def list_page(self, listing: Listing) -> list[Engram]:
        """``StorageBackend.list_page`` from memory: the listing order read from its
        ``after`` key on, each memory tested against the filters until the page is full.

        An unfiltered page reads only its own rows. A filtered one tests the memory type
        on the text index's labels and the other filters on each memory's ``Facets``,
        read in place from a loaded snapshot's arrays: a scan unpacks no row."""
        if listing.limit <= 0:
            return []
        before = None
        if listing.after is not None:
            accessed, created, key = listing.after
            before = order_key(str(key), utc(accessed), utc(created))  # type: ignore[arg-type]
        with self.lock:
            if listing.memory_type is None and not listing.is_filtered():
                return self.get_engrams(self.recency.head(listing.limit, before))
            label = None
            if listing.memory_type is not None:
                label = self.labels.get(listing.memory_type)
                if label is None:
                    return []  # no memory of that type
            keep = _facet_filter(listing)
            keys = self.recency.newest(before, copy=False)
            if label is not None:  # the text index's labels: no row read for other types
                doc_of, labels = self.graph.text.doc_of, self.graph.text.labels
                keys = (k for k in keys if (d := doc_of.get(k)) is None or labels[d] == label)
            chosen: list[str] = []
            for key, facets in self.graph.facets(keys):
                if keep(facets):
                    chosen.append(key)
                    if len(chosen) >= listing.limit:
                        break
            return self.get_engrams(chosen)

    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Cues whose normalised name is in ``names``, with embeddings."""
        keys = dict.fromkeys(normalise_cue_name(n) for n in names)
        found = [self.cues_by_key[k] for k in keys if k in self.cues_by_key]
        return [Cue(c.id, c.name, c.cue_type, self.cue_vectors.vector(c.id)) for c in found]

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Cues with these ids (unknown skipped), with embeddings."""
        found = [self.cues_by_id[i] for i in dict.fromkeys(ids) if i in self.cues_by_id]
        return [Cue(c.id, c.name, c.cue_type, self.cue_vectors.vector(c.id)) for c in found]

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        """Top-``k`` engrams with cosine similarity of at least ``min_score``."""
        return self.vectors.search(embedding, k, None, min_score) if k > 0 else []

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields (a snapshot taken in pages)."""
        keys = sorted(self.graph.rows)
        for start in range(0, len(keys), 1000):
            with self.graph.lock:  # peek: a walk over every row must not unpack them all
                rows = [(k, self.graph.rows.peek(k)) for k in keys[start : start + 1000]]
            for key, row in rows:
                if row is not None:
                    yield EngramStats(
                        id=key,
                        importance=row[POS["importance"]],  # type: ignore[arg-type]
                        access_count=row[POS["access_count"]],  # type: ignore[arg-type]
                        last_accessed_at=row[POS["last_accessed_at"]],  # type: ignore[arg-type]
                        decay_factor=row[POS["decay_factor"]],  # type: ignore[arg-type]
                        cluster_id=row[POS["cluster_id"]],  # type: ignore[arg-type]
                    )

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge (a snapshot): exported as arrays under the lock, made
        into ``Association``s as they are read. A list of them all would hold ~50 MB at
        100,000 memories, in the middle of a consolidation (its clustering reads them)."""
        with self.graph.lock:
            ids = list(self.graph.rows)
            exported = self.graph.export_edges({key: i for i, key in enumerate(ids)})
        return _associations(ids, *exported)


def _associations(
    ids: list[str],
    sources: np.ndarray,
    targets: np.ndarray,
    strengths: np.ndarray,
    relations: np.ndarray,
    created: np.ndarray,
    names: list[str],
    chunk: int = 10_000,
) -> Iterator[Association]:
    """The exported edges (``Graph.export_edges``) as ``Association``s, a chunk at a time."""
    when = datetime.fromtimestamp
    for lo in range(0, len(sources), chunk):
        part = slice(lo, lo + chunk)
        columns = (sources[part], targets[part], strengths[part], relations[part], created[part])
        for a, b, s, r, t in zip(*(c.tolist() for c in columns), strict=True):
            yield Association(ids[a], ids[b], s, names[r], None if t != t else when(t, UTC))


def _no_vector(engram_id: str) -> None:
    return None


def _facet_filter(listing: Listing) -> Callable[[Facets], bool]:
    """Whether a memory's ``Facets`` pass every filter of ``listing`` (its ``matches``)."""
    checks: list[Callable[[Facets], bool]] = []
    if listing.memory_type is not None:
        kind = listing.memory_type
        checks.append(lambda f: f[0] == kind)
    if listing.tags:
        wanted = frozenset(listing.tags)
        if listing.all_tags:
            checks.append(lambda f: wanted.issubset(f[1]))
        else:
            checks.append(lambda f: not wanted.isdisjoint(f[1]))
    # Creation times compare as POSIX seconds: distinct microseconds stay distinct.
    if listing.since is not None:
        since = utc(listing.since).timestamp()  # type: ignore[union-attr]
        checks.append(lambda f: f[2] >= since)
    if listing.until is not None:
        until = utc(listing.until).timestamp()  # type: ignore[union-attr]
        checks.append(lambda f: f[2] < until)
    if not listing.include_superseded:
        checks.append(lambda f: not f[3])
    if listing.cluster_id is not None:
        cluster = int(listing.cluster_id)
        checks.append(lambda f: f[4] == cluster)
    if listing.origin is not None:
        wanted = listing.origin
        checks.append(lambda f: origin_matches(f[5], wanted))
    keep = checks[0]
    for check in checks[1:]:
        keep = _both(keep, check)
    return keep


def _both(
    first: Callable[[Facets], bool], then: Callable[[Facets], bool]
) -> Callable[[Facets], bool]:
    return lambda f: first(f) and then(f)


def _pack_links(
    links: Iterable[Link], slots: dict[str, int], cue_slots: dict[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(engram slots, cue slots, strengths) of the links between known ends, each pair
    once (the last one read wins, as a dict would keep it)."""
    e, c, s = array("i"), array("i"), array("d")
    for link in links:
        i, j = slots.get(link.engram_id), cue_slots.get(link.cue_id)
        if i is not None and j is not None:
            e.append(i)
            c.append(j)
            s.append(float(link.strength))
    arrays = _last_of_each(
        np.frombuffer(e, np.int32), np.frombuffer(c, np.int32), max(len(cue_slots), 1)
    )
    return arrays[0], arrays[1], np.frombuffer(s, np.float64)[arrays[2]]


def _pack_associations(
    associations: Iterable[Association], slots: dict[str, int]
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], list[str]]:
    """The associations between known engrams as ``Graph.adopt_edges`` takes them, and
    the relation names."""
    a, b, s, r, t = array("i"), array("i"), array("d"), array("h"), array("d")
    relations: dict[str, int] = {}
    for edge in associations:
        i, j = slots.get(edge.source_id), slots.get(edge.target_id)
        if i is not None and j is not None:
            a.append(i)
            b.append(j)
            s.append(float(edge.strength))
            r.append(relations.setdefault(edge.relation_type, len(relations)))
            t.append(np.nan if edge.created_at is None else edge.created_at.timestamp())
    src, dst, keep = _last_of_each(
        np.frombuffer(a, np.int32), np.frombuffer(b, np.int32), max(len(slots), 1)
    )
    columns = (np.frombuffer(s, np.float64), np.frombuffer(r, np.int16), np.frombuffer(t))
    return (src, dst, *(c[keep] for c in columns)), list(relations)  # type: ignore[return-value]


def _last_of_each(
    first: np.ndarray, second: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``first`` and ``second`` with repeated pairs dropped but the last, and the
    indexes kept."""
    if not first.size:
        return first.copy(), second.copy(), np.zeros(0, np.int64)
    pair = first.astype(np.int64) * width + second
    _, last_from_end = np.unique(pair[::-1], return_index=True)
    keep = np.sort(pair.size - 1 - last_from_end)
    return first[keep], second[keep], keep
