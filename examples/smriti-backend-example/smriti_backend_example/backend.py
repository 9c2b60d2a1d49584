"""``JsonFileBackend``: a user's whole graph in memory, saved to one JSON file per write.

A store is ``{STORAGE_LOCATION}/{user}/memory.json``; the file is replaced atomically
(written beside it, then renamed), so a crash leaves the old or the new graph, never
half of one. ``SMRITI_JSONFILE_FSYNC`` (its one setting) says whether each write waits
for the disk. Searches scan: exact cosine over the engram and cue vectors, BM25 over the
text analyzer's terms. Fine for thousands of memories, and for reading: the point is
how little a backend needs, not speed.
"""

from __future__ import annotations

import copy
import json
import math
import os
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from smriti import Setting
from smriti.backend import (
    Association,
    BackendError,
    BackendOptions,
    CoOccurrence,
    Cue,
    CueMatch,
    Engram,
    EngramUpdate,
    Link,
    Seeds,
    Seek,
    StorageBackend,
    StoredMemory,
    cosine_top_k,
    document_terms,
    index_terms,
    normalise_cue_name,
    open_private,
    private_dir,
)
from smriti_backend_example import records

#: The backend's own setting: declared here, validated at startup by the core, listed by
#: ``smriti doctor``, and passed in ``BackendOptions.settings``.
FSYNC = Setting.choice(
    "SMRITI_JSONFILE_FSYNC",
    "on",
    ("on", "off"),
    help="Example JSON file backend: `on` waits for the disk after every write; `off` "
    "leaves it to the operating system (faster, may lose the last writes on a crash).",
)
FILE = "memory.json"
#: BM25's term-frequency saturation and length normalisation.
K1, B = 1.2, 0.75


@dataclass(slots=True)
class Graph:
    """One user's records, by id (edges by their endpoints)."""

    engrams: dict[str, Engram] = field(default_factory=dict)
    cues: dict[str, Cue] = field(default_factory=dict)
    links: dict[tuple[str, str], Link] = field(default_factory=dict)
    associations: dict[tuple[str, str, str], Association] = field(default_factory=dict)
    cooccurs: dict[tuple[str, str], CoOccurrence] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)

    def cue_by_key(self, key: str) -> Cue | None:
        """The stored cue whose normalised name is ``key``."""
        return next((c for c in self.cues.values() if normalise_cue_name(c.name) == key), None)


class JsonFileBackend(StorageBackend):
    """A store in one JSON file per user (``DB_TYPE=jsonfile``)."""

    name: ClassVar[str] = "jsonfile"
    description: ClassVar[str] = "example: one JSON file per user under STORAGE_LOCATION"
    #: The file is not locked: one process writes it (others reach it through an owner).
    single_process: ClassVar[bool] = True
    store_files: ClassVar[tuple[str, ...]] = (FILE,)
    declared_settings = (FSYNC,)

    def __init__(self, user: str, path: Path, fsync: bool = True) -> None:
        super().__init__(user)
        self.path = path
        self.fsync = fsync
        self._graph = Graph()
        self._lock = threading.RLock()

    @classmethod
    def from_options(cls, options: BackendOptions) -> JsonFileBackend:
        """The file in the user's directory; fsync as ``SMRITI_JSONFILE_FSYNC`` says."""
        return cls(options.user, options.user_dir / FILE, options.get(FSYNC) == "on")

    # -- lifecycle and persistence ------------------------------------------------------
    def open(self) -> None:
        """Read the file (a missing one is an empty store)."""
        with self._lock:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                data = None
            except (OSError, ValueError) as exc:
                raise BackendError(f"cannot read the store {self.path}: {exc}") from exc
            self._graph = _decode(data) if data is not None else Graph()

    def close(self) -> None:
        """Nothing to flush: every write was saved."""

    def _save(self) -> None:
        private_dir(self.path.parent)
        temp = self.path.with_name(self.path.name + ".tmp")
        with open_private(temp, "w", encoding="utf-8") as out:
            json.dump(_encode(self._graph), out, ensure_ascii=False)
            out.flush()
            if self.fsync:
                os.fsync(out.fileno())
        os.replace(temp, self.path)

    def _write(self, change: Any) -> Any:
        """Apply ``change(graph)`` and save, or leave the graph as it was on failure."""
        with self._lock:
            before = copy.copy(self._graph)
            for name in ("engrams", "cues", "links", "associations", "cooccurs", "meta"):
                setattr(before, name, dict(getattr(self._graph, name)))
            try:
                result = change(self._graph)
                self._save()
            except BaseException:
                self._graph = before
                raise
            return result

    # -- metadata -----------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value."""
        return self._graph.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        self._write(lambda g: g.meta.__setitem__(key, value))

    # -- writes -------------------------------------------------------------------------
    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Store one memory atomically (see ``StorageBackend.add_memory``)."""
        with self._lock:
            existing = self._graph.engrams.get(engram.id)
            if existing is not None:
                if existing.content != engram.content:
                    raise BackendError(f"engram {engram.id} exists with other content")
                stored = [self._graph.cues[lk.cue_id] for lk in self._links_of(engram.id)]
                return StoredMemory(existing, stored)
            # Every conversion that may fail happens before anything is written.
            vector = _vector(engram.embedding)
            fresh = [Cue(c.id, c.name, c.cue_type, _vector(c.embedding)) for c in cues]
            return self._write(lambda g: _add(g, engram, vector, fresh, associations))

    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Write every non-None field of each update; unknown ids are ignored."""

        def change(g: Graph) -> None:
            for update in updates:
                if (engram := g.engrams.get(update.id)) is not None:
                    fields = {k: v for k in _UPDATED if (v := getattr(update, k)) is not None}
                    g.engrams[update.id] = engram.with_changes(**fields)

        self._write(change)

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams and every edge touching them; how many existed."""

        def change(g: Graph) -> int:
            gone = {i for i in ids if g.engrams.pop(i, None) is not None}
            g.links = {k: v for k, v in g.links.items() if k[0] not in gone}
            g.associations = {
                k: v for k, v in g.associations.items() if k[0] not in gone and k[1] not in gone
            }
            return len(gone)

        return self._write(change)

    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy, with their CoOccurs edges."""

        def change(g: Graph) -> int:
            used = {cue_id for _, cue_id in g.links}
            orphans = set(g.cues) - used
            for cue_id in orphans:
                del g.cues[cue_id]
            g.cooccurs = {
                k: v for k, v in g.cooccurs.items() if k[0] not in orphans and k[1] not in orphans
            }
            return len(orphans)

        return self._write(change)

    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Load records as given; existing ids are replaced."""

        def change(g: Graph) -> None:
            g.engrams.update((e.id, e) for e in engrams)
            g.cues.update((c.id, c) for c in cues)
            g.links.update(((lk.engram_id, lk.cue_id), lk) for lk in links)
            g.associations.update((_edge(a), a) for a in associations)
            g.cooccurs.update(((c.source_id, c.target_id), c) for c in cooccurrences)

        self._write(change)

    # -- reads --------------------------------------------------------------------------
    def seek(self, query: Seek) -> Seeds:
        """Direct hits on every channel, by scanning (see ``StorageBackend.seek``)."""
        with self._lock:
            g = self._graph
            seeds = Seeds(total=len(g.engrams))
            if query.vector is not None and query.k > 0:
                seeds.vector = _vector_hits(g, query)
            if query.text and query.k > 0:
                seeds.text = _text_hits(g, query)
            seeds.cues = _cue_matches(g, query)
            return seeds

    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id."""
        with self._lock:
            engrams = sorted(self._graph.engrams.values(), key=lambda e: e.id)
        yield from engrams

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, ordered by id."""
        with self._lock:
            cues = sorted(self._graph.cues.values(), key=lambda c: c.id)
        yield from cues

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge."""
        with self._lock:
            yield from list(self._graph.links.values())

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge."""
        with self._lock:
            yield from list(self._graph.associations.values())

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge."""
        with self._lock:
            yield from list(self._graph.cooccurs.values())

    def _links_of(self, engram_id: str) -> list[Link]:
        return [lk for (e, _), lk in self._graph.links.items() if e == engram_id]


#: The EngramUpdate fields ``update_engrams`` writes.
_UPDATED = (
    "access_count",
    "last_accessed_at",
    "decay_factor",
    "cluster_id",
    "importance",
    "tags",
    "superseded_by",
    "superseded_at",
)


def _vector(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.float32)


def _edge(a: Association) -> tuple[str, str, str]:
    return (a.source_id, a.target_id, a.relation_type)


def _add(
    g: Graph,
    engram: Engram,
    vector: np.ndarray | None,
    cues: list[Cue],
    found: Sequence[Association],
) -> StoredMemory:
    """Write one new memory into ``g`` (the caller saves it or rolls back)."""
    g.engrams[engram.id] = engram.with_changes(embedding=vector)
    stored: dict[str, Cue] = {}
    for cue in cues:
        kept = g.cue_by_key(normalise_cue_name(cue.name))
        if kept is None:
            g.cues[cue.id] = kept = cue
        stored[kept.id] = kept
        g.links[(engram.id, kept.id)] = Link(engram.id, kept.id, 1.0)
    for a in stored:
        for b in stored:
            if a != b:
                old = g.cooccurs.get((a, b))
                g.cooccurs[(a, b)] = CoOccurrence(a, b, (old.strength if old else 0.0) + 1.0)
    for edge in found:
        if edge.target_id in g.engrams and edge.target_id != engram.id:
            g.associations[_edge(edge)] = edge
    return StoredMemory(g.engrams[engram.id], list(stored.values()))


def _vector_hits(g: Graph, query: Seek) -> list[tuple[str, float]]:
    engrams = [e for e in g.engrams.values() if e.embedding is not None]
    if not engrams:
        return []
    matrix = np.stack([_unit(e.embedding) for e in engrams])
    mask = np.array([query.memory_type in (None, e.memory_type) for e in engrams])
    assert query.vector is not None
    hits = cosine_top_k(matrix, query.vector, query.k, mask)
    return [(engrams[i].id, s) for i, s in hits if s >= query.vector_floor]


def _text_hits(g: Graph, query: Seek) -> list[tuple[str, float]]:
    """BM25 over content, summary and tags; the memory type filter before the cut."""
    wanted = set(index_terms(query.text or ""))
    docs = {e.id: (e, document_terms(e)) for e in g.engrams.values()}
    if not wanted or not docs:
        return []
    average = sum(sum(t.values()) for _, t in docs.values()) / len(docs) or 1.0
    df = Counter(term for _, t in docs.values() for term in wanted & t.keys())
    scores = []
    for engram_id, (engram, tf) in docs.items():
        if query.memory_type not in (None, engram.memory_type):
            continue
        score = _bm25(tf, wanted, df, len(docs), average)
        if score > 0:
            scores.append((engram_id, score))
    scores.sort(key=lambda hit: (-hit[1], hit[0]))
    return scores[: query.k]


def _bm25(tf: Counter[str], wanted: set[str], df: Counter[str], n: int, avg: float) -> float:
    length = sum(tf.values())
    score = 0.0
    for term in wanted & tf.keys():
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        score += idf * tf[term] * (K1 + 1) / (tf[term] + K1 * (1 - B + B * length / avg))
    return score


def _cue_matches(g: Graph, query: Seek) -> list[CueMatch]:
    """Cues matched by name (1.0) or by embedding, best first, with degree and members."""
    similarity = _near_cues(g, query)
    for name in query.cue_names:
        if (cue := g.cue_by_key(normalise_cue_name(name))) is not None:
            similarity[cue.id] = 1.0
    members: dict[str, list[Link]] = {}
    for (_, cue_id), lk in g.links.items():
        if cue_id in similarity:
            members.setdefault(cue_id, []).append(lk)
    out = []
    for cue_id in sorted(similarity, key=lambda c: (-similarity[c], c)):
        edges = members.get(cue_id, [])
        edges.sort(key=lambda lk: (-g.engrams[lk.engram_id].importance, lk.engram_id))
        top = [(lk.engram_id, lk.strength) for lk in edges[: max(query.cue_fanout, 0)]]
        cue = g.cues[cue_id]
        out.append(CueMatch(cue_id, similarity[cue_id], len(edges), top, cue.cue_type))
    return out


def _near_cues(g: Graph, query: Seek) -> dict[str, float]:
    rows = query.cue_vectors
    cues = [c for c in g.cues.values() if c.embedding is not None]
    if rows is None or not rows.size or query.cue_neighbours <= 0 or not cues:
        return {}
    matrix = np.stack([_unit(c.embedding) for c in cues])
    best: dict[str, float] = {}
    for row in np.atleast_2d(rows):
        for i, score in cosine_top_k(matrix, row, query.cue_neighbours):
            if score >= query.cue_similarity:
                best[cues[i].id] = max(score, best.get(cues[i].id, -2.0))
    return best


def _unit(vector: Any) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def _encode(g: Graph) -> dict[str, Any]:
    return {
        "engrams": [records.to_json(e) for e in g.engrams.values()],
        "cues": [records.to_json(c) for c in g.cues.values()],
        "links": [records.to_json(lk) for lk in g.links.values()],
        "associations": [records.to_json(a) for a in g.associations.values()],
        "cooccurs": [records.to_json(c) for c in g.cooccurs.values()],
        "meta": g.meta,
    }


def _decode(data: dict[str, Any]) -> Graph:
    g = Graph(meta=dict(data["meta"]))
    g.engrams = {e.id: e for e in map(records.engram, data["engrams"])}
    g.cues = {c.id: c for c in map(records.cue, data["cues"])}
    g.links = {(lk.engram_id, lk.cue_id): lk for lk in map(records.link, data["links"])}
    g.associations = {_edge(a): a for a in map(records.association, data["associations"])}
    cooccurs = map(records.cooccurrence, data["cooccurs"])
    g.cooccurs = {(c.source_id, c.target_id): c for c in cooccurs}
    return g
