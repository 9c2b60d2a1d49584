"""The working set's graph: engram rows and EncodedBy/AssociatedWith adjacency.

Rows hold an engram's fields without its embedding (``smriti.backend.vector_cache`` holds
those); cue -> engram lists are kept most important first where recall needs them
(``smriti.index.ranking``). Every structure shares one id object per engram and cue
(ids read back with a million links were otherwise separate strings). A loaded graph
keeps its rows and edges packed in arrays (``adopt_rows``, ``adopt_edges``) and
unpacks a memory's only when something touches it.
"""

from __future__ import annotations

import heapq
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from sys import intern
from typing import Any

import numpy as np

from smriti.backend import Association, Engram, Link, document_terms, text_terms
from smriti.index.packed import LazyMap, Packed
from smriti.index.ranking import TopByImportance
from smriti.index.text import TextIndex

#: Engram fields kept per row, in this order (the embedding lives in the vector cache).
FIELDS = (
    "content", "summary", "memory_type", "importance", "access_count", "created_at",
    "last_accessed_at", "decay_factor", "source", "tags", "cluster_id",
    "supersedes", "superseded_by", "superseded_at", "origin", "principal",
)  # fmt: skip
POS = {f: i for i, f in enumerate(FIELDS)}
#: Each row also holds its key: the one id object that every structure shares.
_KEY = len(FIELDS)
#: What a listing's filters read of a memory: (memory type, tags, creation time as POSIX
#: seconds, superseded_by, cluster id, origin).
Facets = tuple[str, Sequence[str], float, str, int, str]


def edge_converter(relations: Sequence[str]) -> Callable[[tuple[np.ndarray, ...]], list[object]]:
    """The ``Packed`` converter of association columns (strength, relation, creation time)
    to the values the graph holds: relations index ``relations``, times are POSIX
    seconds (NaN: none)."""
    when = datetime.fromtimestamp

    def convert(columns: tuple[np.ndarray, ...]) -> list[object]:
        s, r, t = columns
        return [
            (sv, relations[rv], None if tv != tv else when(tv, UTC))
            for sv, rv, tv in zip(s.tolist(), r.tolist(), t.tolist(), strict=True)
        ]

    return convert


def _strengths(columns: tuple[np.ndarray, ...]) -> list[object]:
    return columns[0].tolist()  # type: ignore[no-any-return]


def utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC datetime (naive values are taken as UTC)."""
    if value is None or value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Graph:
    """Engram rows, EncodedBy/AssociatedWith adjacency and the text index, in memory."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rows: LazyMap[list[object]] = LazyMap()
        self.e2c: LazyMap[dict[str, float]] = LazyMap()
        self.c2e: LazyMap[dict[str, float]] = LazyMap()
        self.out: LazyMap[dict[str, tuple[float, str, datetime | None]]] = LazyMap()
        self.inn: LazyMap[dict[str, tuple[float, str, datetime | None]]] = LazyMap()
        #: One shared object per cue id (see ``_KEY``).
        self.cue_ids: dict[str, str] = {}
        #: The relation names the packed associations' relation indexes refer to.
        self.relations: list[str] = []
        self.text = TextIndex()
        self.ranking = TopByImportance()
        #: The facets of a still-packed row, read from the packed arrays (``adopt_rows``).
        self._packed_facets: Callable[[int], Facets] | None = None

    # -- engrams ------------------------------------------------------------------------
    def put_engram(self, e: Engram, label: int) -> None:
        """Insert or replace the row of ``e``."""
        as_stored = utc
        with self.lock:
            old = self.rows.get(e.id)
            summary = e.content if e.summary == e.content else e.summary  # share the text
            row = [
                e.content, summary, e.memory_type, float(e.importance), int(e.access_count),
                as_stored(e.created_at), as_stored(e.last_accessed_at),
                float(e.decay_factor), e.source or "",
                [str(t) for t in e.tags], int(e.cluster_id),
                e.supersedes or "", e.superseded_by or "", as_stored(e.superseded_at),
                intern(e.origin or ""), intern(e.principal or ""), e.id,
            ]  # fmt: skip
            self.rows[e.id] = row
            if old is None or old[:2] != row[:2] or old[9] != row[9]:
                self.text.add(e.id, document_terms(e), label)
            else:
                self.text.set_label(e.id, label)
            if old is not None and old[3] != row[3]:
                self._rerank(e.id, old[3])  # type: ignore[arg-type]

    def update(self, key: str, field: str, value: object) -> None:
        """Set one field of a row (an ``EngramUpdate`` field): new tags re-index its text,
        a new importance moves it in the cue lists."""
        with self.lock:
            row = self.rows.get(key)
            if row is None:
                return
            if field in ("importance", "decay_factor"):
                value = float(value)  # type: ignore[arg-type]
            elif field in ("access_count", "cluster_id"):
                value = int(value)  # type: ignore[call-overload]
            elif field in ("last_accessed_at", "superseded_at"):
                value = utc(value)  # type: ignore[arg-type]
            elif field == "tags":
                value = [str(t) for t in value]  # type: ignore[attr-defined]
            elif field == "superseded_by":
                value = str(value)
            before = row[POS[field]]
            row[POS[field]] = value
            if field == "importance" and before != value:
                self._rerank(key, before)  # type: ignore[arg-type]
            elif field == "tags" and before != value:
                self._reindex(key, row)

    def _reindex(self, key: str, row: list[object]) -> None:
        """Index the text of ``row`` again (its tags changed), under the same label."""
        text = self.text
        doc = text.doc_of.get(key)
        label = text.labels[doc] if doc is not None else 0
        terms = text_terms(row[0], row[1], row[POS["tags"]])  # type: ignore[arg-type]
        text.add(row[_KEY], terms, label)  # type: ignore[arg-type]

    def engram(self, key: str, embedding: np.ndarray | None) -> Engram | None:
        row = self.rows.get(key)
        if row is None:
            return None
        return Engram(
            id=key, content=row[0], summary=row[1], memory_type=row[2],  # type: ignore[arg-type]
            importance=row[3], access_count=row[4], created_at=row[5],  # type: ignore[arg-type]
            last_accessed_at=row[6], decay_factor=row[7], embedding=embedding,  # type: ignore[arg-type]
            source=row[8], tags=list(row[9]), cluster_id=row[10],  # type: ignore[arg-type]
            supersedes=row[11], superseded_by=row[12], superseded_at=row[13],  # type: ignore[arg-type]
            origin=row[14], principal=row[15],  # type: ignore[arg-type]
        )  # fmt: skip

    def remove_engrams(self, keys: Iterable[str]) -> None:
        with self.lock:
            for key in keys:
                row = self.rows.pop(key, None)
                if row is None:
                    continue
                self.text.remove(key)
                # Removed from the other ends without unpacking them (a hub's members,
                # a neighbour's edges): most stay packed (``LazyMap.discard``).
                for cue in self.e2c.pop(key, {}):
                    self.c2e.discard(cue, key)
                    self.ranking.removed(cue, key, row[3])  # type: ignore[arg-type]
                for other in self.out.pop(key, {}):
                    self.inn.discard(other, key)
                for other in self.inn.pop(key, {}):
                    self.out.discard(other, key)

    def remove_cues(self, cue_ids: Iterable[str]) -> None:
        with self.lock:
            for cue in cue_ids:
                self.cue_ids.pop(cue, None)
                for key in self.c2e.pop(cue, {}):
                    self.e2c.discard(key, cue)
                self.ranking.drop(cue)

    # -- edges ---------------------------------------------------------------------------
    def put_links(self, links: Iterable[tuple[str, str, float]]) -> None:
        with self.lock:
            rows, cue_ids, c2e = self.rows, self.cue_ids, self.c2e
            for key, cue, strength in links:
                row = rows.get(key)
                if row is None:
                    continue
                key = row[_KEY]  # type: ignore[assignment]
                cue = cue_ids.setdefault(cue, cue)
                self.e2c.setdefault(key, {})[cue] = strength
                if self.e2c.is_base(key):  # loaded packed: the cue's packed list may hold it
                    members = c2e.setdefault(cue, {})
                    before, count = members.get(key), len(members)
                    members[key] = strength
                else:  # a memory stored since: no need to unpack a hub cue's members
                    before, count = c2e.add_new(cue, key, strength)
                if before is None:
                    self.ranking.added(cue, key, strength, row[3], count)  # type: ignore[arg-type]
                elif before != strength:
                    self.ranking.restrengthened(cue, key, strength, row[3])  # type: ignore[arg-type]

    def put_associations(self, edges: Iterable[Association], undated: datetime | None) -> None:
        """Insert or update edges; ``undated`` is the creation time of an edge without one
        (as the store wrote it)."""
        as_stored = utc
        undated = as_stored(undated)
        with self.lock:
            rows = self.rows
            for a in edges:
                src_row, dst_row = rows.get(a.source_id), rows.get(a.target_id)
                if src_row is None or dst_row is None:
                    continue
                src, dst = src_row[_KEY], dst_row[_KEY]
                old = self.out.get(src, {}).get(dst)  # type: ignore[call-overload]
                if old is not None:
                    created = old[2]
                elif a.created_at is None:
                    created = undated
                else:
                    created = as_stored(a.created_at)
                value = (float(a.strength), a.relation_type, created)
                self.out.setdefault(src, {})[dst] = value  # type: ignore[index]
                self.inn.setdefault(dst, {})[src] = value  # type: ignore[index]

    def _rerank(self, key: str, old: float) -> None:
        """The importance of ``key`` changed from ``old``: move it in the cue lists."""
        importance = self.rows[key][3]
        for cue, strength in self.e2c.get(key, {}).items():
            members = self.c2e.size(cue)
            self.ranking.reranked(cue, key, strength, old, importance, members)  # type: ignore[arg-type]

    # -- reads ---------------------------------------------------------------------------
    def engrams_for_cue(self, cue: str, limit: int) -> list[tuple[str, float]]:
        with self.lock:
            count = self.c2e.size(cue)
            if not count or limit <= 0:
                return []
            rows, c2e = self.rows, self.c2e
            return self.ranking.best(
                cue,
                limit,
                lambda: c2e.get(cue, {}),
                lambda k: rows[k][3],
                count,  # type: ignore[arg-type,index]
            )

    def rank_hubs(self) -> None:
        """Compute the importance lists of every cue with more members than a list holds.

        Called once the mirror is loaded, so the first recalls through a hub cue after
        opening do not pay for sorting its members (~15 ms for 48,000 at 100k memories);
        smaller cues are computed when first asked for, at little cost.
        """
        with self.lock:
            rows, cap, c2e = self.rows, self.ranking.CAP, self.c2e
            for cue in list(c2e):
                count = c2e.size(cue)
                if count > cap:
                    members = c2e.peek(cue)  # not kept unpacked: the list is what recall reads
                    self.ranking.best(cue, cap, members or {}, lambda k: rows[k][3], count)  # type: ignore[arg-type,index]

    def degree(self, cue: str) -> int:
        return self.c2e.size(cue)

    # -- packed loading ----------------------------------------------------------------
    def adopt_rows(
        self,
        ids: list[str],
        row: Callable[[int], list[object]],
        facets: Callable[[int], Facets] | None = None,
    ) -> dict[str, int]:
        """Take the rows of an empty graph packed: ``row(s)`` builds the row of
        ``ids[s]`` (whose key object is ``ids[s]``) when first read, ``facets(s)`` its
        ``Facets`` without building it. Returns the slots."""
        slots = {k: i for i, k in enumerate(ids)}
        self.rows = LazyMap(slots, row)
        self._packed_facets = facets
        return slots

    def facets(self, keys: Iterable[str]) -> Iterator[tuple[str, Facets]]:
        """(key, what a listing filters on) of each of ``keys`` that is a memory, in that
        order, lazily. A packed row is read in place: a filtered scan over a loaded
        snapshot unpacks nothing. One loop, no call per key but the packed read: a scan
        may visit every memory."""
        live, slots, taken = self.rows.parts()
        packed = self._packed_facets
        for key in keys:
            row = live.get(key)
            if row is None:
                slot = slots.get(key)
                if slot is None or key in taken:
                    continue
                if packed is not None:
                    yield key, packed(slot)
                    continue
                row = self.rows.peek(key)
                if row is None:
                    continue
            yield key, (row[2], row[9], row[5].timestamp(), row[12], row[10], row[14])  # type: ignore[misc,union-attr]

    def adopt_edges(
        self,
        ids: list[str],
        slots: dict[str, int],
        cues: list[str],
        links: tuple[np.ndarray, np.ndarray, np.ndarray],
        edges: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        relations: list[str],
    ) -> None:
        """Take EncodedBy and AssociatedWith edges into a graph that has none, packed.

        Slots index ``ids`` (engrams; ``slots`` is the inverse) and ``cues``. ``links``
        are (engram slots, cue slots, strengths), ``edges`` (source slots, target slots,
        strengths, relations as indexes into ``relations``, creation times as POSIX
        seconds or NaN)."""
        cue_slots = {c: i for i, c in enumerate(cues)}
        for cue in cues:
            self.cue_ids.setdefault(cue, cue)
        e, c, strength = links
        column = (np.asarray(strength, dtype=np.float64),)
        self.e2c = Packed.from_pairs(ids, e, c, cues, column, _strengths).lazy_map(slots)  # type: ignore[assignment]
        self.c2e = Packed.from_pairs(cues, c, e, ids, column, _strengths).lazy_map(cue_slots)  # type: ignore[assignment]
        src, dst, *columns = edges
        self.relations = list(relations)
        values, convert = tuple(columns), edge_converter(self.relations)
        self.out = Packed.from_pairs(ids, src, dst, ids, values, convert).lazy_map(slots)  # type: ignore[assignment]
        self.inn = Packed.from_pairs(ids, dst, src, ids, values, convert).lazy_map(slots)  # type: ignore[assignment]

    def export_links(
        self, slot: dict[str, int], cue_slot: dict[str, int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(engram slots, cue slots, strengths) of every link between keys of ``slot``
        and ``cue_slot``, taken from the packed lists without unpacking them."""
        live, skip = self.e2c.touched()
        parts = []
        packed = self.e2c.packed
        if packed is not None:
            src, dst, (strength,) = packed.pairs(skip)
            parts.append(_renumbered(src, dst, (strength,), packed, slot, cue_slot))
        e, c, s = array("i"), array("i"), array("d")
        for key, cues in live.items():
            i = slot.get(key)
            for cue, value in cues.items() if i is not None else ():
                j = cue_slot.get(cue)
                if j is not None:
                    e.append(i)  # type: ignore[arg-type]
                    c.append(j)
                    s.append(value)
        parts.append((_ints(e), _ints(c), (np.frombuffer(s, np.float64),)))
        return _joined(parts, 1)  # type: ignore[return-value]

    def export_edges(self, slot: dict[str, int]) -> tuple[Any, ...]:
        """(source slots, target slots, strengths, relation indexes, creation times,
        relation names) of every association between keys of ``slot``, as
        ``adopt_edges`` takes them, without unpacking the packed lists."""
        live, skip = self.out.touched()
        names: dict[str, int] = {}
        parts = []
        packed = self.out.packed
        if packed is not None:
            src, dst, (s, r, t) = packed.pairs(skip)
            known = np.array([names.setdefault(n, len(names)) for n in self.relations], np.int16)
            r = known[r] if known.size else r
            parts.append(_renumbered(src, dst, (s, r, t), packed, slot, slot))
        a, b, s, r, t = (array(code) for code in "iidhd")
        for key, out in live.items():
            i = slot.get(key)
            for other, (strength, relation, created) in out.items() if i is not None else ():
                j = slot.get(other)
                if j is not None:
                    a.append(i)  # type: ignore[arg-type]
                    b.append(j)
                    s.append(strength)
                    r.append(names.setdefault(relation, len(names)))
                    t.append(np.nan if created is None else created.timestamp())
        columns = (np.frombuffer(s, np.float64), np.frombuffer(r, np.int16), np.frombuffer(t))
        parts.append((_ints(a), _ints(b), columns))
        return (*_joined(parts, 3), list(names))

    def unpacked(self) -> int:
        """How many edges are held as dicts rather than packed (for the memory estimate)."""
        return sum(m.unpacked() for m in (self.e2c, self.c2e, self.out, self.inn))

    def links_of(self, keys: Sequence[str]) -> list[Link]:
        with self.lock:
            return [
                Link(key, cue, strength)
                for key in dict.fromkeys(keys)
                for cue, strength in self.e2c.get(key, {}).items()
            ]

    def associations_of(self, keys: Sequence[str], limit: int) -> list[Association]:
        found: dict[tuple[str, str], Association] = {}
        with self.lock:
            for key in dict.fromkeys(keys):
                for side, edges in ((0, self.out.get(key)), (1, self.inn.get(key))):
                    if not edges:
                        continue
                    # Ties by the other end's id, as the backends order them: which of
                    # equally strong edges the limit keeps must not depend on insertion.
                    best = heapq.nsmallest(limit, edges.items(), key=lambda kv: (-kv[1][0], kv[0]))
                    for other, (strength, rel, created) in best:
                        src, dst = (key, other) if side == 0 else (other, key)
                        found[(src, dst)] = Association(src, dst, strength, rel, created)
        return list(found.values())


def _ints(values: array) -> np.ndarray:  # type: ignore[type-arg]
    return np.frombuffer(values, np.int32) if len(values) else np.zeros(0, np.int32)


def _renumbered(
    src: np.ndarray,
    dst: np.ndarray,
    columns: tuple[np.ndarray, ...],
    packed: Packed,
    slot: dict[str, int],
    target_slot: dict[str, int],
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Packed pairs renumbered from the packed lists' slots to ``slot`` / ``target_slot``
    (pairs with an end in neither are dropped)."""
    new_src = np.array([slot.get(k, -1) for k in packed.keys], dtype=np.int64)
    new_dst = np.array([target_slot.get(k, -1) for k in packed.names], dtype=np.int64)
    a = new_src[src] if new_src.size else src
    b = new_dst[dst] if new_dst.size else dst
    keep = (a >= 0) & (b >= 0)
    return a[keep].astype(np.int32), b[keep].astype(np.int32), tuple(c[keep] for c in columns)


def _joined(
    parts: list[tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]], width: int
) -> tuple[np.ndarray, ...]:
    """Concatenate export parts: (sources, targets, *columns)."""
    sources = np.concatenate([p[0] for p in parts]).astype(np.int32)
    targets = np.concatenate([p[1] for p in parts]).astype(np.int32)
    columns = [np.concatenate([p[2][i] for p in parts]) for i in range(width)]
    return (sources, targets, *columns)
