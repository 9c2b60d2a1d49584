"""The working set's graph: engram rows and EncodedBy/AssociatedWith adjacency.

Rows hold an engram's fields without its embedding (``smriti.index.vectors`` holds
those); cue -> engram lists are kept most important first where recall needs them
(``smriti.index.ranking``). Every structure shares one id object per engram and cue
(ids read back with a million links were otherwise separate strings).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import numpy as np

from smriti.index.ranking import TopByImportance
from smriti.index.text import TextIndex, document_terms
from smriti.model import Association, Engram, Link

#: Engram fields kept per row, in this order (the embedding lives in the vector cache).
FIELDS = (
    "content", "summary", "memory_type", "importance", "access_count", "created_at",
    "last_accessed_at", "decay_factor", "source", "tags", "cluster_id",
)  # fmt: skip
POS = {f: i for i, f in enumerate(FIELDS)}
#: Each row also holds its key: the one id object that every structure shares.
_KEY = len(FIELDS)


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
            elif field == "last_accessed_at":
                value = utc(value)  # type: ignore[arg-type]
            before = row[POS[field]]
            row[POS[field]] = value
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
