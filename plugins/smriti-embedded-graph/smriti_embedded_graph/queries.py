"""The reads of the embedded graph backend: lookups, listings, searches and streams.

These are the native reads: recall reaches them only while no working set answers it
(``smriti.index``: before it is loaded, above its budget, or with
``SMRITI_WORKING_SET=off``), so they favour a small footprint over speed. Cues are
always answered from memory (they are kept to merge new ones on their name); vectors
from Kùzu's HNSW index when it was built (``native_indexes``), else by an exact scan
streamed in chunks of node offsets; text from Kùzu's full-text index when built, else
by a ``CONTAINS`` scan ranked with BM25.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from smriti.backend import (
    Association,
    CoOccurrence,
    Cue,
    Engram,
    EngramStats,
    Link,
    Listing,
    cosine_top_k,
    listing_sorted,
    normalise_cue_name,
    unit,
)
from smriti_embedded_graph.codec import (
    ASSOC_FIELDS,
    CUE_FIELDS,
    ENGRAM_COLUMNS,
    ENGRAM_FIELDS,
    LINK_FIELDS,
    association_from_row,
    cue_from_row,
    engram_from_row,
    ts_in,
    ts_out,
    vec_out,
)
from smriti_embedded_graph.cuemap import CueMap
from smriti_embedded_graph.store import GraphStore
from smriti_embedded_graph.text import bm25, document_counts, needle, query_terms, query_tokens
from smriti_embedded_graph.writebehind import WriteBehind

PAGE = 1000
#: Up to this many ids are looked up one primary key at a time (0.2 ms each); more go
#: through one ``UNWIND`` join, which scans the whole table (tens of ms at 100k).
BY_KEY = 16
#: Row order of ENGRAM_FIELDS, for engrams still in the write-behind queue.
_FIELD_ORDER = tuple(f.strip().removeprefix("e.") for f in ENGRAM_FIELDS.split(","))
assert set(_FIELD_ORDER) <= set(ENGRAM_COLUMNS)


def _type_filter(memory_type: str | None, alias: str = "e") -> str:
    return "" if memory_type is None else f"WHERE {alias}.memory_type = $t"


def _listing_where(listing: Listing) -> tuple[str, dict[str, Any]]:
    """The ``WHERE`` clause of ``listing``'s filters and ``after`` key, with its
    parameters. Only the number of tags shapes the query text; every value is a
    parameter (Kùzu 0.11.3 fails an assertion on a parameter inside a list
    quantifier such as ``any(x IN e.tags WHERE x IN $tags)``, so one
    ``list_contains`` per tag)."""
    terms: list[str] = []
    params: dict[str, Any] = {}
    if listing.memory_type is not None:
        terms.append("e.memory_type = $t")
        params["t"] = listing.memory_type
    if listing.tags:
        tags = list(dict.fromkeys(listing.tags))
        joiner = " AND " if listing.all_tags else " OR "
        terms.append(
            "(" + joiner.join(f"list_contains(e.tags, $g{i})" for i in range(len(tags))) + ")"
        )
        params.update({f"g{i}": str(tag) for i, tag in enumerate(tags)})
    if listing.since is not None:
        terms.append("e.created_at >= $since")
        params["since"] = ts_in(listing.since)
    if listing.until is not None:
        terms.append("e.created_at < $until")
        params["until"] = ts_in(listing.until)
    if not listing.include_superseded:
        terms.append("coalesce(e.superseded_by, '') = ''")
    if listing.cluster_id is not None:
        terms.append("e.cluster_id = $cluster")
        params["cluster"] = int(listing.cluster_id)
    if listing.origin is not None:  # a prefix ends in ':' (smriti.model.origin_matches)
        if listing.origin.endswith(":"):
            terms.append("starts_with(coalesce(e.origin, ''), $origin)")
        else:
            terms.append("coalesce(e.origin, '') = $origin")
        params["origin"] = listing.origin
    if listing.after is not None:
        # Strictly after in (last access, creation, id) descending order. The key holds
        # the values this backend returned (microseconds, as Kùzu stores them).
        accessed, created, last_id = listing.after
        terms.append(
            "(e.last_accessed_at < $la OR (e.last_accessed_at = $la AND "
            "(e.created_at < $ca OR (e.created_at = $ca AND e.id < $aid))))"
        )
        params.update({"la": ts_in(accessed), "ca": ts_in(created), "aid": last_id})
    return ("WHERE " + " AND ".join(terms) if terms else ""), params


class Reader:
    """Every read of the StorageBackend contract, and the finer reads ``seek`` is made
    of: Kùzu's rows through ``journal`` (after the queued memories; queued ones are
    read from it when the disk held them back), cues and engram ids from ``cues``,
    the HNSW index's width from ``store``."""

    def __init__(self, store: GraphStore, cues: CueMap, journal: WriteBehind) -> None:
        self._store = store
        self._cues = cues
        self._journal = journal

    # -- what the write path keeps in memory ----------------------------------------------
    def load_cue_map(self) -> None:
        """Read every cue, the id of every engram (a few MB at 100k) and the embeddings'
        width into ``cues`` (at open, and after a failed import)."""
        for rows in self._journal.by_offset("(c:Cue)", "c", CUE_FIELDS):
            self._cues.remember(cue_from_row(r) for r in rows)
        ids: set[str] = set()
        # One collected list per chunk, not a row each: fetching a row reacquires the
        # interpreter lock, which the snapshot's preload holds meanwhile (5 ms a turn).
        for rows in self._journal.by_offset("(e:Engram)", "e", "collect(e.id)", step=100_000):
            ids.update(rows[0][0])
        sample = self._journal.query(
            "MATCH (e:Engram) WHERE e.embedding IS NOT NULL RETURN e.embedding LIMIT 1"
        )
        vector = vec_out(sample[0][0]) if sample else None
        self._cues.dims = None if vector is None else int(vector.shape[0])
        self._cues.engram_ids = ids

    # -- metadata and indexes -----------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value, or None."""
        rows = self._journal.query("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": key})
        return rows[0][0] if rows else None

    def index_names(self) -> set[str]:
        """Names of the indexes that exist in this store."""
        return {row[1] for row in self._journal.query("CALL SHOW_INDEXES() RETURN *")}

    # -- engrams --------------------------------------------------------------------------
    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The engrams with these ids (always with their embeddings: they come in the
        same column read); unknown ids skipped (without a query)."""
        known = self._cues.engram_ids
        wanted = [i for i in dict.fromkeys(ids) if known is None or i in known]
        if not wanted:
            return []
        if len(wanted) <= BY_KEY:
            one = f"MATCH (e:Engram {{id: $id}}) RETURN {ENGRAM_FIELDS}"
            rows = [r for i in wanted for r in self._journal.query(one, {"id": i}, lag_ok=True)]
        else:
            rows = self._journal.query(
                f"UNWIND $ids AS i MATCH (e:Engram {{id: i}}) RETURN {ENGRAM_FIELDS}",
                {"ids": wanted},
                lag_ok=True,
            )
        found = {r[0]: engram_from_row(r) for r in rows}
        for engram in self._queued_engrams(set(wanted) - found.keys()):
            found[engram.id] = engram
        return list(found.values())

    def _queued_engrams(self, ids: Iterable[str] | None = None) -> list[Engram]:
        """Engrams stored but not yet in Kùzu (waiting for disk space), of ``ids`` (all
        when None)."""
        queued = self._journal.queued()
        if not queued:
            return []
        chosen = None if ids is None else set(ids)
        return [
            engram_from_row([m.row[f] for f in _FIELD_ORDER])
            for m in queued
            if chosen is None or m.row["id"] in chosen
        ]

    def list_page(self, listing: Listing) -> list[Engram]:
        """A filtered page in listing order (``smriti.backend.Listing``): every filter and
        the ``after`` key in the query, before its ``LIMIT``."""
        if listing.limit <= 0:
            return []
        where, params = _listing_where(listing)
        rows = self._journal.query(
            f"MATCH (e:Engram) {where} RETURN {ENGRAM_FIELDS} "
            "ORDER BY e.last_accessed_at DESC, e.created_at DESC, e.id DESC LIMIT $k",
            {**params, "k": int(listing.limit)},
            lag_ok=True,
        )
        found = [engram_from_row(r) for r in rows]
        # Memories still waiting for disk space to reach Kùzu, from the queue.
        waiting = self._queued_engrams()
        if not waiting:
            return found
        known = {e.id for e in found}
        return listing_sorted(found + [e for e in waiting if e.id not in known], listing)

    def count_engrams(self) -> int:
        """How many engrams this store holds (counted in memory)."""
        if self._cues.engram_ids is not None:
            return len(self._cues.engram_ids)
        return int(self._journal.query("MATCH (e:Engram) RETURN count(e)")[0][0])

    def counts(self) -> dict[str, int]:
        """Counts of engrams, cues and the three edge kinds."""
        self._journal.fold_cooccurrences()
        queries = {
            "engrams": "MATCH (e:Engram) RETURN count(e)",
            "cues": "MATCH (c:Cue) RETURN count(c)",
            "links": "MATCH ()-[r:EncodedBy]->() RETURN count(r)",
            "associations": "MATCH ()-[r:AssociatedWith]->() RETURN count(r)",
            "cooccurrences": "MATCH ()-[r:CoOccurs]->() RETURN count(r)",
        }
        return {name: int(self._journal.query(q)[0][0]) for name, q in queries.items()}

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields, in chunks of node offsets (keyset pages
        sort the whole table once per page)."""
        fields = (
            "e.id, e.importance, e.access_count, e.last_accessed_at, e.decay_factor, e.cluster_id"
        )
        for rows in self._journal.by_offset("(e:Engram)", "e", fields):
            for r in rows:
                yield EngramStats(
                    id=r[0],
                    importance=float(r[1]),
                    access_count=int(r[2]),
                    last_accessed_at=ts_out(r[3]),
                    decay_factor=float(r[4]),
                    cluster_id=int(r[5]),
                )

    def _pages(self, table: str, alias: str, fields: str, size: int = PAGE) -> Iterator[list[Any]]:
        """Rows of ``table`` in id order, ``size`` at a time (keyset pagination)."""
        after = ""
        while True:
            rows = self._journal.query(
                f"MATCH ({alias}:{table}) WHERE {alias}.id > $after RETURN {fields} "
                f"ORDER BY {alias}.id LIMIT $n",
                {"after": after, "n": int(size)},
            )
            if not rows:
                return
            yield rows
            if len(rows) < size:
                return
            after = rows[-1][0]

    def embedding_pages(self) -> Iterator[list[tuple[str, np.ndarray]]]:
        """(id, embedding) of the engrams with an embedding, a chunk at a time."""
        where = "e.embedding IS NOT NULL"
        for rows in self._journal.by_offset("(e:Engram)", "e", "e.id, e.embedding", where=where):
            page = [(r[0], vec_out(r[1])) for r in rows]
            yield [(k, v) for k, v in page if v is not None]

    # -- vector and text search ----------------------------------------------------------------
    def vector_search(
        self, embedding: np.ndarray, k: int, memory_type: str | None = None
    ) -> list[tuple[str, float]]:
        """Top-k by cosine: the HNSW index when built, else an exact scan."""
        if k <= 0:
            return []
        if self._store.vector_index_dims and "engram_vec" in self.index_names():
            hits = self._hnsw_search(embedding, k, memory_type)
            if hits is not None:
                return hits
        return self._scan_search(embedding, k, memory_type)

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        """Top-k with cosine >= ``min_score``."""
        return [(i, s) for i, s in self.vector_search(embedding, k) if s >= min_score]

    def _hnsw_search(
        self, embedding: np.ndarray, k: int, memory_type: str | None
    ) -> list[tuple[str, float]] | None:
        query = unit(embedding)
        if query.shape[0] != self._store.vector_index_dims:
            return None
        fetch = k if memory_type is None else k * 4
        rows = self._journal.query(
            "CALL QUERY_VECTOR_INDEX('EngramVec', 'engram_vec', $q, $k, efs := 200) "
            "WITH node AS v, distance MATCH (e:Engram {id: v.id}) "
            f"{_type_filter(memory_type)} RETURN e.id, 1.0 - distance AS s ORDER BY s DESC",
            {"q": query.tolist(), "k": int(fetch), **({"t": memory_type} if memory_type else {})},
        )
        if memory_type is not None and len(rows) < k and fetch < self.count_engrams():
            return None  # the filter removed too many candidates: let the exact scan answer
        return [(r[0], float(r[1])) for r in rows[:k]]

    def _scan_search(
        self, embedding: np.ndarray, k: int, memory_type: str | None
    ) -> list[tuple[str, float]]:
        """Exact top-k over the stored embeddings, a chunk of node offsets at a time."""
        query = unit(embedding)
        width = query.shape[0] * 4
        where = "e.embedding IS NOT NULL"
        params: dict[str, Any] = {}
        if memory_type is not None:
            where += " AND e.memory_type = $t"
            params["t"] = memory_type
        best: list[tuple[str, float]] = []
        for rows in self._journal.by_offset(
            "(e:Engram)", "e", "e.id, e.embedding", where=where, params=params
        ):
            raw = [base64.b64decode(r[1]) for r in rows]
            keep = [i for i, b in enumerate(raw) if len(b) == width]
            if not keep:
                continue
            block = b"".join(raw[i] for i in keep)
            matrix = np.frombuffer(block, dtype="<f4").reshape(len(keep), -1).astype(np.float32)
            norms = np.linalg.norm(matrix, axis=1)
            matrix /= np.where(norms > 0, norms, 1.0)[:, None]
            best += [(rows[keep[i]][0], s) for i, s in cosine_top_k(matrix, query, k)]
            best = sorted(best, key=lambda x: (-x[1], x[0]))[:k]
        return best

    def text_search(
        self, query: str, k: int, memory_type: str | None = None
    ) -> list[tuple[str, float]]:
        """Lexical top-k: Kùzu's FTS index when built, else a BM25 scan."""
        if k <= 0:
            return []
        if "engram_fts" in self.index_names():
            tokens = query_tokens(query)
            return self._fts_search(tokens, k, memory_type) if tokens else []
        terms = query_terms(query)
        return self._scan_text(terms, k, memory_type) if terms else []

    def _fts_search(
        self, tokens: list[str], k: int, memory_type: str | None
    ) -> list[tuple[str, float]]:
        where = "" if memory_type is None else "WHERE node.memory_type = $t"
        rows = self._journal.query(
            "CALL QUERY_FTS_INDEX('Engram', 'engram_fts', $q) WITH node, score "
            f"{where} RETURN node.id, score ORDER BY score DESC, node.id LIMIT $k",
            {"q": " ".join(tokens), "k": int(k), **({"t": memory_type} if memory_type else {})},
        )
        return [(r[0], float(r[1])) for r in rows]

    def _scan_text(
        self, terms: list[str], k: int, memory_type: str | None
    ) -> list[tuple[str, float]]:
        """BM25 over the engrams holding a query term, scored with the core's analyzer;
        ``CONTAINS`` finds candidates (a word may hold a term without being it)."""
        text = "lower(e.content + ' ' + e.summary + ' ' + e.tags_text)"
        params: dict[str, Any] = {f"w{i}": needle(term) for i, term in enumerate(terms)}
        # Only the number of slots shapes the query; the words themselves are parameters.
        match = " OR ".join(f"{text} CONTAINS $w{i}" for i in range(len(terms)))
        where = f"({match})"
        if memory_type is not None:
            where += " AND e.memory_type = $t"
            params["t"] = memory_type
        rows = self._journal.query(
            f"MATCH (e:Engram) WHERE {where} RETURN e.id, e.content, e.summary, e.tags_text",
            params,
        )
        docs = {r[0]: document_counts(r[1], r[2], r[3]) for r in rows}
        return bm25(terms, docs)[:k]

    # -- cues and edges ---------------------------------------------------------------------
    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues whose normalised name is in ``names``, with embeddings (from memory)."""
        keys = dict.fromkeys(normalise_cue_name(n) for n in names)
        by_key = self._cues.by_key
        found = [by_key.get(key) for key in keys]
        return [self._cues.stored(c) for c in found if c is not None]

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Stored cues with these ids, with embeddings (from memory)."""
        by_id = self._cues.by_id
        found = [by_id.get(i) for i in dict.fromkeys(ids)]
        return [self._cues.stored(c) for c in found if c is not None]

    def cue_vector_search(self, embedding: np.ndarray, k: int) -> list[tuple[Cue, float]]:
        """Top-k cues by cosine, from the in-process cue cache."""
        by_id = self._cues.by_id
        found = ((by_id.get(i), s) for i, s in self._cues.cache.search(embedding, k))
        return [(c, s) for c, s in found if c is not None]

    def engrams_for_cues(
        self, cue_ids: Sequence[str], limit_per_cue: int
    ) -> dict[str, list[tuple[str, float]]]:
        """Up to ``limit_per_cue`` most important engrams per cue (by primary key)."""
        out: dict[str, list[tuple[str, float]]] = {}
        for cid in dict.fromkeys(cue_ids):
            rows = self._journal.query(
                "MATCH (e:Engram)-[r:EncodedBy]->(c:Cue {id: $c}) RETURN e.id, r.strength "
                "ORDER BY e.importance DESC, e.id LIMIT $n",
                {"c": cid, "n": max(0, int(limit_per_cue))},
            )
            out[cid] = [(r[0], float(r[1])) for r in rows]
        return out

    def cue_degrees(self, cue_ids: Sequence[str]) -> dict[str, int]:
        """Number of engrams each cue encodes."""
        rows = self._journal.query(
            "UNWIND $ids AS i MATCH (e:Engram)-[:EncodedBy]->(c:Cue {id: i}) RETURN c.id, count(e)",
            {"ids": list(dict.fromkeys(cue_ids))},
        )
        degrees = dict.fromkeys(cue_ids, 0)
        degrees.update({r[0]: int(r[1]) for r in rows})
        return degrees

    def cues_of(self, engram_ids: Sequence[str]) -> list[Link]:
        """The EncodedBy edges of these engrams."""
        rows = self._journal.query(
            "UNWIND $ids AS i MATCH (e:Engram {id: i})-[r:EncodedBy]->(c:Cue) "
            "RETURN e.id, c.id, r.strength",
            {"ids": list(dict.fromkeys(engram_ids))},
        )
        return [Link(r[0], r[1], float(r[2])) for r in rows]

    def associations_of(
        self, engram_ids: Sequence[str], limit_per_engram: int
    ) -> list[Association]:
        """AssociatedWith edges touching these engrams, strongest per engram and direction."""
        ids = list(dict.fromkeys(engram_ids))
        found: dict[tuple[str, str, str], Association] = {}
        for end in ("a", "b"):
            rows = self._journal.query(
                f"UNWIND $ids AS i MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) "
                f"WHERE {end}.id = i RETURN i, a.id, b.id, r.strength, r.relation_type, "
                "r.created_at ORDER BY r.strength DESC",
                {"ids": ids},
            )
            taken: dict[str, int] = defaultdict(int)
            for anchor, src, dst, strength, rel, created in rows:
                if taken[anchor] >= limit_per_engram:
                    continue
                taken[anchor] += 1
                found[(src, dst, rel)] = Association(
                    src, dst, float(strength), rel, ts_out(created) if created else None
                )
        return list(found.values())

    # -- streams --------------------------------------------------------------------------------
    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id, fetched in pages."""
        for rows in self._pages("Engram", "e", ENGRAM_FIELDS, max(1, batch_size)):
            yield from (engram_from_row(r) for r in rows)

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue, ordered by id."""
        for rows in self._pages("Cue", "c", CUE_FIELDS):
            for r in rows:
                yield Cue(r[0], r[1], r[2], vec_out(r[3]))

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge."""
        for r in self._journal.stream(
            f"MATCH (e:Engram)-[r:EncodedBy]->(c:Cue) RETURN {LINK_FIELDS}"
        ):
            yield Link(r[0], r[1], float(r[2]))

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge."""
        rows = self._journal.stream(
            f"MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) RETURN {ASSOC_FIELDS}"
        )
        yield from map(association_from_row, rows)

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge."""
        self._journal.fold_cooccurrences()
        for r in self._journal.stream(
            "MATCH (a:Cue)-[r:CoOccurs]->(b:Cue) RETURN a.id, b.id, r.strength"
        ):
            yield CoOccurrence(r[0], r[1], float(r[2]))

    def working_set_streams(
        self,
    ) -> tuple[Iterable[Cue], Iterable[Engram], Iterable[Link], Iterable[Association]]:
        """Cues from memory; engrams, links and associations in chunks of node offsets,
        in no order (keyset pages, ordered by id, took 40 s over 100k engrams)."""
        return (
            self._kept_cues(),
            (
                engram_from_row(r)
                for rows in self._journal.by_offset("(e:Engram)", "e", ENGRAM_FIELDS)
                for r in rows
            ),
            (
                Link(r[0], r[1], float(r[2]))
                for rows in self._journal.by_offset(
                    "(e:Engram)-[r:EncodedBy]->(c:Cue)", "e", LINK_FIELDS
                )
                for r in rows
            ),
            (
                association_from_row(r)
                for rows in self._journal.by_offset(
                    "(a:Engram)-[r:AssociatedWith]->(b:Engram)", "a", ASSOC_FIELDS
                )
                for r in rows
            ),
        )

    def _kept_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, from the name map and the cue cache."""
        for cue in self._cues.every():
            yield self._cues.stored(cue)
