"""In-process mirror of what recall reads: engram rows, EncodedBy and AssociatedWith
adjacency, and a BM25 inverted index over content, summary and tags.

The backend process holds Kùzu's file lock, so it is the only writer: a mirror loaded
at open and updated after every committed write is authoritative, exactly like the
vector cache. Recall calls a dozen backend methods; answered from Python dicts they
cost microseconds instead of a Kùzu query each (an ``UNWIND ... MATCH`` by id is a
hash join over the whole table in Kùzu 0.11, tens of milliseconds at 10k rows).
Enabled together with the vector cache (``SMRITI_KUZU_CACHE_MB``).
"""

from __future__ import annotations

import heapq
import math
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import numpy as np

from smriti.default_plugins.text import STOPWORDS, stem
from smriti.model import Association, Engram, Link
from smriti_backend_kuzu.codec import ts_in, ts_out
from smriti_backend_kuzu.ranking import TopByImportance
from smriti_backend_kuzu.text import tokenize

#: Engram fields kept per row, in this order (the embedding lives in the vector cache).
FIELDS = (
    "content", "summary", "memory_type", "importance", "access_count", "created_at",
    "last_accessed_at", "decay_factor", "source", "tags", "cluster_id",
)  # fmt: skip
_POS = {f: i for i, f in enumerate(FIELDS)}
#: Each row also holds its key: the one id object that every structure shares (ids read
#: back with links or associations are new, equal strings; 1M links at 100k memories
#: kept ~115 MB of duplicates before).
_KEY = len(FIELDS)


#: token -> its index term ("" for a stopword); cleared when it grows past TERM_CACHE.
_TERM_OF: dict[str, str] = {}
TERM_CACHE = 200_000


def index_terms(text: str) -> list[str]:
    """Terms of the lexical index: word tokens, stopwords dropped, lightly stemmed."""
    table = _TERM_OF
    if len(table) > TERM_CACHE:
        table.clear()
    terms = []
    for token in tokenize(text):
        term = table.get(token)
        if term is None:
            term = table[token] = "" if token in STOPWORDS else stem(token)
        if term:
            terms.append(term)
    return terms


def document_terms(e: Engram) -> Counter[str]:
    """Term frequencies of an engram in the text index: content, summary and tags."""
    return Counter(index_terms(f"{e.content} {e.summary} {' '.join(str(t) for t in e.tags)}"))


class TextIndex:
    """BM25 (k1 1.2, b 0.75) over documents with append-only postings and tombstones."""

    K1 = 1.2
    B = 0.75

    def __init__(self) -> None:
        self.doc_of: dict[str, int] = {}
        self.ids: list[str | None] = []
        self.lengths = array("f")
        self.labels = array("h")
        self.postings: dict[str, tuple[array, array]] = {}
        self.live = 0
        self.total_length = 0.0
        self.dead = 0
        self.alive = bytearray()
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, key: str, terms: Counter[str], label: int) -> None:
        self.remove(key)
        doc = len(self.ids)
        self.doc_of[key] = doc
        self.ids.append(key)
        self.alive.append(1)
        length = float(sum(terms.values()))
        self.lengths.append(length)
        self.labels.append(label)
        for term, tf in terms.items():
            post = self.postings.get(term)
            if post is None:
                post = self.postings[term] = (array("i"), array("f"))
            post[0].append(doc)
            post[1].append(float(tf))
        self.live += 1
        self.total_length += length
        self._arrays = None

    def remove(self, key: str) -> None:
        doc = self.doc_of.pop(key, None)
        if doc is None:
            return
        self.ids[doc] = None
        self.alive[doc] = 0
        self.live -= 1
        self.total_length -= self.lengths[doc]
        self.dead += 1
        self._arrays = None
        # Dead postings are skipped when scoring (df counts live postings) and dropped
        # by compaction once a quarter of the documents are dead.
        if self.dead > max(1000, len(self.ids) // 4):
            self.compact()

    def set_label(self, key: str, label: int) -> None:
        doc = self.doc_of.get(key)
        if doc is not None:
            self.labels[doc] = label
            self._arrays = None

    def compact(self) -> None:
        """Drop dead postings and renumber documents."""
        alive = np.frombuffer(self.alive, dtype=np.uint8).astype(bool)
        remap = np.cumsum(alive) - 1
        postings: dict[str, tuple[array, array]] = {}
        for term, (docs, tfs) in self.postings.items():
            d = np.array(docs, dtype=np.int32)
            keep = alive[d]
            if not keep.any():
                continue
            postings[term] = (
                array("i", remap[d[keep]].astype(np.int32).tobytes()),
                array("f", np.array(tfs, dtype=np.float32)[keep].tobytes()),
            )
        ids = [k for k in self.ids if k is not None]
        lengths = np.array(self.lengths, dtype=np.float32)[alive]
        labels = np.array(self.labels, dtype=np.int16)[alive]
        self.ids = ids
        self.alive = bytearray(b"\x01" * len(ids))
        self.doc_of = {k: i for i, k in enumerate(ids)}
        self.lengths = array("f", lengths.tobytes())
        self.labels = array("h", labels.tobytes())
        self.postings, self.dead = postings, 0
        self._arrays = None

    def _state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies (never views: the buffers grow) of the alive flags, labels, lengths."""
        if self._arrays is None:
            self._arrays = (
                np.frombuffer(self.alive, dtype=np.uint8).astype(bool),
                np.array(self.labels, dtype=np.int16),
                np.array(self.lengths, dtype=np.float32),
            )
        return self._arrays

    def search(self, query: str, k: int, label: int | None = None) -> list[tuple[str, float]]:
        terms = list(dict.fromkeys(index_terms(query)))
        if not terms or self.live == 0 or k <= 0:
            return []
        alive, labels, lengths = self._state()
        avg = self.total_length / self.live or 1.0
        docs_parts, score_parts = [], []
        n = self.live
        for term in terms:
            post = self.postings.get(term)
            if post is None:
                continue
            docs = np.array(post[0], dtype=np.int32)
            tfs = np.array(post[1], dtype=np.float32)
            keep = alive[docs]
            if label is not None:
                keep &= labels[docs] == label
            if not keep.all():
                docs, tfs = docs[keep], tfs[keep]
            if docs.size == 0:
                continue
            df = int(alive[np.array(post[0], dtype=np.int32)].sum()) if self.dead else len(post[0])
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            norm = (
                tfs * (self.K1 + 1) / (tfs + self.K1 * (1 - self.B + self.B * lengths[docs] / avg))
            )
            docs_parts.append(docs)
            score_parts.append(idf * norm)
        if not docs_parts:
            return []
        docs = np.concatenate(docs_parts)
        scores = np.concatenate(score_parts)
        if len(docs_parts) > 1:
            uniq, inverse = np.unique(docs, return_inverse=True)
            scores = np.bincount(inverse, weights=scores).astype(np.float64)
            docs = uniq
        if docs.size > k:
            top = np.argpartition(-scores, k - 1)[:k]
            docs, scores = docs[top], scores[top]
        ranked = sorted(
            ((self.ids[int(d)], float(s)) for d, s in zip(docs, scores, strict=True)),
            key=lambda x: (-x[1], x[0]),
        )
        return [(key, s) for key, s in ranked if key is not None and s > 0]


class GraphMirror:
    """Engram rows, EncodedBy/AssociatedWith adjacency and the text index, in memory."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rows: dict[str, list[object]] = {}
        self.e2c: dict[str, dict[str, float]] = {}
        self.c2e: dict[str, dict[str, float]] = {}
        self.out: dict[str, dict[str, tuple[float, str, datetime | None]]] = {}
        self.inn: dict[str, dict[str, tuple[float, str, datetime | None]]] = {}
        #: One shared object per cue id (see ``_KEY``).
        self.cue_ids: dict[str, str] = {}
        self.text = TextIndex()
        self.ranking = TopByImportance()

    # -- engrams ------------------------------------------------------------------------
    def put_engram(self, e: Engram, label: int, stored: bool = False) -> None:
        """Insert or replace the row of ``e`` (timestamps as stored: microseconds, UTC;
        ``stored`` says they already are, having been read from the store)."""
        as_stored = _same if stored else stored_time
        with self.lock:
            old = self.rows.get(e.id)
            summary = e.content if e.summary == e.content else e.summary  # share the text
            row = [
                e.content, summary, e.memory_type, float(e.importance), int(e.access_count),
                as_stored(e.created_at), as_stored(e.last_accessed_at),
                float(e.decay_factor), e.source or "",
                [str(t) for t in e.tags], int(e.cluster_id), e.id,
            ]  # fmt: skip
            self.rows[e.id] = row
            if old is None or old[:2] != row[:2] or old[9] != row[9]:
                self.text.add(e.id, document_terms(e), label)
            else:
                self.text.set_label(e.id, label)
            if old is not None and old[3] != row[3]:
                self._rerank(e.id, old[3])  # type: ignore[arg-type]

    def update(self, key: str, field: str, value: object) -> None:
        with self.lock:
            row = self.rows.get(key)
            if row is None:
                return
            if field in ("importance", "decay_factor"):
                value = float(value)  # type: ignore[arg-type]
            elif field in ("access_count", "cluster_id"):
                value = int(value)  # type: ignore[call-overload]
            before = row[_POS[field]]
            row[_POS[field]] = value
            if field == "importance" and before != value:
                self._rerank(key, before)  # type: ignore[arg-type]

    def engram(self, key: str, embedding: np.ndarray | None) -> Engram | None:
        row = self.rows.get(key)
        if row is None:
            return None
        return Engram(
            id=key, content=row[0], summary=row[1], memory_type=row[2],  # type: ignore[arg-type]
            importance=row[3], access_count=row[4], created_at=row[5],  # type: ignore[arg-type]
            last_accessed_at=row[6], decay_factor=row[7], embedding=embedding,  # type: ignore[arg-type]
            source=row[8], tags=list(row[9]), cluster_id=row[10],  # type: ignore[arg-type]
        )  # fmt: skip

    def remove_engrams(self, keys: Iterable[str]) -> None:
        with self.lock:
            for key in keys:
                row = self.rows.pop(key, None)
                if row is None:
                    continue
                self.text.remove(key)
                for cue in self.e2c.pop(key, {}):
                    self.c2e.get(cue, {}).pop(key, None)
                    self.ranking.removed(cue, key, row[3])  # type: ignore[arg-type]
                for other in self.out.pop(key, {}):
                    self.inn.get(other, {}).pop(key, None)
                for other in self.inn.pop(key, {}):
                    self.out.get(other, {}).pop(key, None)

    def remove_cues(self, cue_ids: Iterable[str]) -> None:
        with self.lock:
            for cue in cue_ids:
                self.cue_ids.pop(cue, None)
                for key in self.c2e.pop(cue, {}):
                    self.e2c.get(key, {}).pop(cue, None)
                self.ranking.drop(cue)

    # -- edges ---------------------------------------------------------------------------
    def put_links(self, links: Iterable[tuple[str, str, float]]) -> None:
        with self.lock:
            rows, cue_ids = self.rows, self.cue_ids
            for key, cue, strength in links:
                row = rows.get(key)
                if row is None:
                    continue
                key = row[_KEY]  # type: ignore[assignment]
                cue = cue_ids.setdefault(cue, cue)
                members = self.c2e.setdefault(cue, {})
                before = members.get(key)
                self.e2c.setdefault(key, {})[cue] = strength
                members[key] = strength
                if before is None:
                    self.ranking.added(cue, key, strength, row[3], len(members) - 1)  # type: ignore[arg-type]
                elif before != strength:
                    self.ranking.restrengthened(cue, key, strength, row[3])  # type: ignore[arg-type]

    def put_associations(
        self, edges: Iterable[Association], stored: bool = False, undated: datetime | None = None
    ) -> None:
        """Insert or update edges; ``undated`` is the creation time of an edge without one
        (as the store wrote it)."""
        as_stored = _same if stored else stored_time
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
            members = len(self.c2e.get(cue, ()))
            self.ranking.reranked(cue, key, strength, old, importance, members)  # type: ignore[arg-type]

    # -- reads ---------------------------------------------------------------------------
    def engrams_for_cue(self, cue: str, limit: int) -> list[tuple[str, float]]:
        with self.lock:
            members = self.c2e.get(cue)
            if not members or limit <= 0:
                return []
            rows = self.rows
            return self.ranking.best(cue, limit, members, lambda k: rows[k][3])  # type: ignore[arg-type,return-value]

    def rank_hubs(self) -> None:
        """Compute the importance lists of every cue with more members than a list holds.

        Called once the mirror is loaded, so the first recalls through a hub cue after
        opening do not pay for sorting its members (~15 ms for 48,000 at 100k memories);
        smaller cues are computed when first asked for, at little cost.
        """
        with self.lock:
            rows, cap = self.rows, self.ranking.CAP
            for cue, members in self.c2e.items():
                if len(members) > cap:
                    self.ranking.best(cue, cap, members, lambda k: rows[k][3])  # type: ignore[arg-type]

    def degree(self, cue: str) -> int:
        return len(self.c2e.get(cue, ()))

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
                    best = heapq.nlargest(limit, edges.items(), key=lambda kv: kv[1][0])
                    for other, (strength, rel, created) in best:
                        src, dst = (key, other) if side == 0 else (other, key)
                        found[(src, dst)] = Association(src, dst, strength, rel, created)
        return list(found.values())


def stored_time(value: datetime | None) -> datetime | None:
    """A timestamp as Kùzu gives it back (aware UTC); None stays None."""
    if value is None or value.tzinfo is UTC:
        return value
    return ts_out(ts_in(value))


def _same(value: datetime | None) -> datetime | None:
    return value
