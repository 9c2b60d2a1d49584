"""The SQLite backend's reads: lookups, the two coarse reads, and the streams.

``seek`` and ``neighbourhood`` each run in one read transaction, so every channel of
an answer sees the same snapshot. Per-group limits ("up to n per cue, most important
first") are SQL window functions; vector and lexical scores are computed in Python
(``vectors``, ``lexical``). Streams page by primary key, one short read each, so no
transaction stays open while the caller holds the iterator.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from smriti.backend import (
    Association,
    CoOccurrence,
    Cue,
    CueMatch,
    Engram,
    EngramStats,
    Expand,
    Link,
    Listing,
    Neighbourhood,
    Seeds,
    Seek,
    batched,
    normalise_cue_name,
)
from smriti.default_plugins.sqlite import lexical
from smriti.default_plugins.sqlite.codec import (
    ASSOCIATION_COLUMNS,
    CUE_COLUMNS,
    ENGRAM_COLUMNS,
    association_from_row,
    cue_from_row,
    engram_from_row,
    ts_in,
    ts_out,
)
from smriti.default_plugins.sqlite.database import Database
from smriti.default_plugins.sqlite.vectors import VectorTable

CHUNK = 500
PAGE = 1000


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _in_chunks(conn: sqlite3.Connection, query: str, ids: Sequence[str], *extra: Any) -> list[Any]:
    """Rows of ``query`` (with one ``{marks}`` list) for ``ids``, a chunk at a time;
    ``extra`` parameters follow the ids."""
    rows: list[Any] = []
    for chunk in batched(ids, CHUNK):
        rows += conn.execute(query.format(marks=_marks(len(chunk))), (*chunk, *extra)).fetchall()
    return rows


def _listing_where(listing: Listing) -> tuple[str, list[Any]]:
    """The WHERE clause (or "") of a listing's filters and paging key, and its
    parameters. Times compare as stored integers (microseconds), so a key built from a
    returned engram is exact."""
    terms: list[str] = []
    params: list[Any] = []
    if listing.memory_type is not None:
        terms.append("memory_type = ?")
        params.append(listing.memory_type)
    tags = list(dict.fromkeys(listing.tags))
    if tags:
        inside = f"FROM json_each(engram.tags) WHERE value IN ({_marks(len(tags))})"
        if listing.all_tags:
            terms.append(f"(SELECT count(DISTINCT value) {inside}) = ?")
            params += [*tags, len(tags)]
        else:
            terms.append(f"EXISTS (SELECT 1 {inside})")
            params += tags
    if listing.since is not None:
        terms.append("created_at >= ?")
        params.append(ts_in(listing.since))
    if listing.until is not None:
        terms.append("created_at < ?")
        params.append(ts_in(listing.until))
    if not listing.include_superseded:
        terms.append("superseded_by = ''")
    if listing.cluster_id is not None:
        terms.append("cluster_id = ?")
        params.append(int(listing.cluster_id))
    if listing.origin is not None:  # a prefix ends in ':' (origin_matches)
        prefix = listing.origin.endswith(":")
        terms.append("substr(origin, 1, ?) = ?" if prefix else "origin = ?")
        params.extend([len(listing.origin), listing.origin] if prefix else [listing.origin])
    if listing.after is not None:
        accessed, created, key = listing.after
        # A row value: the listing index (ascending, scanned backwards) serves it.
        terms.append("(last_accessed_at, created_at, id) < (?, ?, ?)")
        params += [ts_in(accessed), ts_in(created), str(key)]
    return ("WHERE " + " AND ".join(terms) if terms else ""), params


#: Every (cue, engram, strength, importance) of some cues (covering indexes only).
_MEMBERS = (
    "SELECT l.cue_id, l.engram_id, l.strength, e.importance FROM link AS l "
    "JOIN engram AS e ON e.id = l.engram_id WHERE l.cue_id IN ({marks})"
)
#: Up to ?N strongest associations per engram at one end (ties by the other end's id).
_EDGES = (
    "SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY {end} "
    "ORDER BY strength DESC, {other}) AS rank FROM association WHERE {end} IN ({{marks}})) "
    "WHERE rank <= ?"
)


class Reader:
    """Every read of the StorageBackend contract, from ``db``; vector searches scan
    the in-process tables ``engram_vectors`` and ``cue_vectors``, refreshed from it."""

    def __init__(self, db: Database, engram_vectors: VectorTable, cue_vectors: VectorTable) -> None:
        self._db = db
        self._engram_vectors = engram_vectors
        self._cue_vectors = cue_vectors

    # -- metadata -----------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value, or None."""
        with self._db.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    # -- engrams ------------------------------------------------------------------------
    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The engrams with these ids (always with their embeddings); unknown skipped."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        with self._db.read() as conn:
            rows = _in_chunks(
                conn, f"SELECT {ENGRAM_COLUMNS} FROM engram WHERE id IN ({{marks}})", unique
            )
        return [engram_from_row(r) for r in rows]

    def list_page(self, listing: Listing) -> list[Engram]:
        """A filtered page in listing order (see StorageBackend.list_page): one query
        with every filter and the paging key in its WHERE clause, before its LIMIT."""
        if listing.limit <= 0:
            return []
        where, params = _listing_where(listing)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {ENGRAM_COLUMNS} FROM engram {where} "
                "ORDER BY last_accessed_at DESC, created_at DESC, id DESC LIMIT ?",
                (*params, int(listing.limit)),
            ).fetchall()
        return [engram_from_row(r) for r in rows]

    def count_engrams(self) -> int:
        """How many engrams this user has."""
        with self._db.read() as conn:
            return int(conn.execute("SELECT count(*) FROM engram").fetchone()[0])

    def counts(self) -> dict[str, int]:
        """Counts of engrams, cues and the three edge kinds, from one snapshot."""
        tables = {
            "engrams": "engram",
            "cues": "cue",
            "links": "link",
            "associations": "association",
            "cooccurrences": "cooccurrence",
        }
        with self._db.read() as conn:
            return {
                name: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                for name, table in tables.items()
            }

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields, in pages ordered by id."""
        columns = "id, importance, access_count, last_accessed_at, decay_factor, cluster_id"
        for rows in self._pages("engram", columns, ("id",)):
            for r in rows:
                yield EngramStats(
                    id=r[0],
                    importance=float(r[1]),
                    access_count=int(r[2]),
                    last_accessed_at=ts_out(r[3]),
                    decay_factor=float(r[4]),
                    cluster_id=int(r[5]),
                )

    # -- cues ---------------------------------------------------------------------------
    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues whose normalised name is in ``names`` (one per name)."""
        keys = list(dict.fromkeys(normalise_cue_name(n) for n in names))
        if not keys:
            return []
        query = f"SELECT {CUE_COLUMNS}, key FROM cue WHERE key IN ({{marks}}) ORDER BY seq DESC"
        with self._db.read() as conn:
            rows = _in_chunks(conn, query, keys)
        newest: dict[str, Cue] = {}
        for row in rows:
            newest.setdefault(row[4], cue_from_row(row))
        return [newest[k] for k in keys if k in newest]

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Stored cues with these ids, with embeddings; unknown skipped (a lookup)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        query = f"SELECT {CUE_COLUMNS} FROM cue WHERE id IN ({{marks}})"
        with self._db.read() as conn:
            return [cue_from_row(r) for r in _in_chunks(conn, query, unique)]

    # -- the coarse reads -----------------------------------------------------------------
    def seek(self, query: Seek) -> Seeds:
        """Direct hits on every channel in one snapshot (see StorageBackend.seek)."""
        seeds = Seeds()
        with self._db.read() as conn:
            seeds.total = int(conn.execute("SELECT count(*) FROM engram").fetchone()[0])
            if query.vector is not None and query.k > 0:
                self._engram_vectors.refresh(conn)
                seeds.vector = self._engram_vectors.search(
                    query.vector, query.k, query.vector_floor, query.memory_type
                )
            if query.text and query.k > 0:
                seeds.text = lexical.search(conn, query.text, query.k, query.memory_type)
            seeds.cues = self._cue_matches(conn, query)
        return seeds

    def _cue_matches(self, conn: sqlite3.Connection, query: Seek) -> list[CueMatch]:
        """Cues matched by name (1.0) or embedding, best first, with degree and engrams."""
        similarity: dict[str, float] = {}
        vectors = query.cue_vectors
        if vectors is not None and vectors.size and query.cue_neighbours > 0:
            self._cue_vectors.refresh(conn)
            similarity = self._cue_vectors.nearest(
                vectors, query.cue_neighbours, query.cue_similarity
            )
        keys = list(dict.fromkeys(normalise_cue_name(n) for n in query.cue_names))
        if keys:
            rows = _in_chunks(conn, "SELECT id FROM cue WHERE key IN ({marks})", keys)
            similarity.update((r[0], 1.0) for r in rows)
        if not similarity:
            return []
        ids = sorted(similarity, key=lambda c: (-similarity[c], c))
        degrees = self._degrees(conn, ids)
        members = self._members(conn, ids, query.cue_fanout)
        types = dict(_in_chunks(conn, "SELECT id, cue_type FROM cue WHERE id IN ({marks})", ids))
        return [
            CueMatch(
                c, float(similarity[c]), degrees.get(c, 0), members.get(c, []), types.get(c, "")
            )
            for c in ids
        ]

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` in one snapshot (see StorageBackend.neighbourhood)."""
        ids = list(dict.fromkeys(query.ids))
        out = Neighbourhood()
        if not ids:
            return out
        with self._db.read() as conn:
            out.associations = self._associations(conn, ids, query.edges)
            rows = _in_chunks(
                conn,
                "SELECT engram_id, cue_id, strength FROM link WHERE engram_id IN ({marks})",
                ids,
            )
            out.links = [Link(r[0], r[1], float(r[2])) for r in rows]
            cue_ids = list(dict.fromkeys(link.cue_id for link in out.links))
            out.degrees = self._degrees(conn, cue_ids)
            small = [c for c in cue_ids if out.degrees.get(c, 0) <= query.cue_max_degree]
            out.members = self._members(conn, small, query.engrams_per_cue)
        return out

    def _degrees(self, conn: sqlite3.Connection, cue_ids: Sequence[str]) -> dict[str, int]:
        """How many engrams each cue encodes."""
        query = "SELECT cue_id, count(*) FROM link WHERE cue_id IN ({marks}) GROUP BY cue_id"
        degrees = dict.fromkeys(cue_ids, 0)
        degrees.update((r[0], int(r[1])) for r in _in_chunks(conn, query, cue_ids))
        return degrees

    def _members(
        self, conn: sqlite3.Connection, cue_ids: Sequence[str], limit: int
    ) -> dict[str, list[tuple[str, float]]]:
        """Up to ``limit`` (engram id, strength) per cue, most important first."""
        if limit <= 0 or not cue_ids:
            return {}
        # Ranked here: a window function over the same rows took twice as long (10k rows).
        ranked: dict[str, list[tuple[float, str, float]]] = {c: [] for c in cue_ids}
        for cue_id, engram_id, strength, importance in _in_chunks(conn, _MEMBERS, cue_ids):
            ranked[cue_id].append((-importance, engram_id, float(strength)))
        return {
            c: [(e, s) for _, e, s in heapq.nsmallest(limit, rows)] for c, rows in ranked.items()
        }

    def _associations(
        self, conn: sqlite3.Connection, ids: Sequence[str], limit: int
    ) -> list[Association]:
        """Edges touching ``ids``: up to ``limit`` strongest per engram and direction."""
        if limit <= 0:
            return []
        found: dict[tuple[str, str], Association] = {}
        for end, other in (("source_id", "target_id"), ("target_id", "source_id")):
            query = _EDGES.format(columns=ASSOCIATION_COLUMNS, end=end, other=other)
            for row in _in_chunks(conn, query, ids, int(limit)):
                found.setdefault((row[0], row[1]), association_from_row(row))
        return list(found.values())

    # -- streams ------------------------------------------------------------------------
    def _pages(
        self, table: str, columns: str, key: tuple[str, ...], size: int = PAGE
    ) -> Iterator[list[Any]]:
        """Rows of ``table`` ordered by ``key`` (its primary key, the first columns of
        ``columns``), ``size`` at a time; each page is its own short read."""
        order = ", ".join(key)
        after: tuple[Any, ...] | None = None
        while True:
            where = "" if after is None else f"WHERE ({order}) > ({_marks(len(key))})"
            with self._db.read() as conn:
                rows = conn.execute(
                    f"SELECT {columns} FROM {table} {where} ORDER BY {order} LIMIT ?",
                    (*(after or ()), int(size)),
                ).fetchall()
            if rows:
                yield rows
            if len(rows) < size:
                return
            after = tuple(rows[-1][: len(key)])

    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id."""
        for rows in self._pages("engram", ENGRAM_COLUMNS, ("id",), max(1, int(batch_size))):
            yield from (engram_from_row(r) for r in rows)

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, ordered by id."""
        for rows in self._pages("cue", CUE_COLUMNS, ("id",)):
            yield from (cue_from_row(r) for r in rows)

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge, ordered by (engram id, cue id)."""
        for rows in self._pages("link", "engram_id, cue_id, strength", ("engram_id", "cue_id")):
            yield from (Link(r[0], r[1], float(r[2])) for r in rows)

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge, ordered by (source id, target id)."""
        key = ("source_id", "target_id")
        for rows in self._pages("association", ASSOCIATION_COLUMNS, key):
            yield from (association_from_row(r) for r in rows)

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge, ordered by (source id, target id)."""
        key = ("source_id", "target_id")
        for rows in self._pages("cooccurrence", "source_id, target_id, strength", key):
            yield from (CoOccurrence(r[0], r[1], float(r[2])) for r in rows)
