"""The working set's lexical index: BM25 (k1 1.2, b 0.75) over content, summary and tags.

Documents and queries go through the one analyzer, ``smriti.backend.text``. Postings are
append-only ``array``s; deleted or replaced documents are tombstoned (document
frequencies count live postings) and compacted once a quarter are dead. Only the
postings of the query's terms are scored (numpy), top-k by ``argpartition``.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from typing import Any

import numpy as np

from smriti.backend.text import index_terms

__all__ = ["TextIndex"]


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
        #: Postings restored from a snapshot, as (start, end) in two shared arrays; a
        #: term moves to ``postings`` when a document adds to it.
        self.frozen: dict[str, tuple[int, int]] = {}
        self.frozen_docs = np.zeros(0, dtype=np.int32)
        self.frozen_tfs = np.zeros(0, dtype=np.float32)

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
                post = self.postings[term] = self._thawed(term)
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

    def _thawed(self, term: str) -> tuple[array, array]:
        """Mutable postings of ``term``: its frozen ones copied, or none."""
        span = self.frozen.pop(term, None)
        if span is None:
            return array("i"), array("f")
        lo, hi = span
        return (
            array("i", self.frozen_docs[lo:hi].tobytes()),
            array("f", self.frozen_tfs[lo:hi].tobytes()),
        )

    def posting(self, term: str) -> tuple[Any, Any] | None:
        """(documents, term frequencies) of ``term``, or None."""
        post = self.postings.get(term)
        if post is not None:
            return post
        span = self.frozen.get(term)
        if span is None:
            return None
        return self.frozen_docs[span[0] : span[1]], self.frozen_tfs[span[0] : span[1]]

    def terms(self) -> list[str]:
        """Every term with postings."""
        return [*self.postings, *self.frozen]

    def freeze(
        self, terms: list[str], sizes: np.ndarray, docs: np.ndarray, tfs: np.ndarray
    ) -> None:
        """Take ``terms``' postings as consecutive runs of ``sizes`` in ``docs``/``tfs``."""
        ends = np.cumsum(sizes).tolist()
        starts = [0, *ends[:-1]] if ends else []
        self.frozen = dict(zip(terms, zip(starts, ends, strict=True), strict=True))
        self.frozen_docs, self.frozen_tfs = docs, tfs

    def compact(self) -> None:
        """Drop dead postings and renumber documents."""
        for term in list(self.frozen):
            self.postings[term] = self._thawed(term)
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
            post = self.posting(term)
            if post is None:
                continue
            docs = np.array(post[0], dtype=np.int32)
            # Scored in float64, as the backends score: a float32 score differs from
            # theirs in the 7th digit, enough to reorder near-ties downstream.
            tfs = np.array(post[1], dtype=np.float64)
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
                tfs
                * (self.K1 + 1)
                / (tfs + self.K1 * (1 - self.B + self.B * lengths[docs].astype(np.float64) / avg))
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
