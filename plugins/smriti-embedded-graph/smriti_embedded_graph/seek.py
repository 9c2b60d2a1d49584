"""The storage contract's coarse reads (``seek``, ``neighbourhood``) for Kùzu.

Composed from the finer reads of the ``Reader`` (Kùzu queries, cues from memory),
which the ``Seeker`` is given as ``FineReads``. They are the native path: a working
set (``smriti.index``) answers recall once it is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from smriti.backend import Association, Cue, CueMatch, Expand, Link, Neighbourhood, Seeds, Seek


class FineReads(Protocol):
    """The finer reads ``seek`` and ``neighbourhood`` are composed of."""

    def count_engrams(self) -> int:
        """How many engrams the store holds."""
        ...

    def vector_search(
        self, embedding: np.ndarray, k: int, memory_type: str | None = None
    ) -> list[tuple[str, float]]:
        """Top-k engram ids by cosine."""
        ...

    def text_search(
        self, query: str, k: int, memory_type: str | None = None
    ) -> list[tuple[str, float]]:
        """Lexical top-k engram ids."""
        ...

    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues by name."""
        ...

    def cue_vector_search(self, embedding: np.ndarray, k: int) -> list[tuple[Cue, float]]:
        """Top-k cues by cosine."""
        ...

    def cue_degrees(self, cue_ids: Sequence[str]) -> dict[str, int]:
        """How many engrams each cue encodes."""
        ...

    def engrams_for_cues(
        self, cue_ids: Sequence[str], limit_per_cue: int
    ) -> dict[str, list[tuple[str, float]]]:
        """Up to ``limit_per_cue`` most important (engram id, strength) per cue."""
        ...

    def cues_of(self, engram_ids: Sequence[str]) -> list[Link]:
        """The EncodedBy edges of these engrams."""
        ...

    def associations_of(
        self, engram_ids: Sequence[str], limit_per_engram: int
    ) -> list[Association]:
        """AssociatedWith edges touching these engrams."""
        ...


class Seeker:
    """``seek`` and ``neighbourhood`` composed from ``reads``."""

    def __init__(self, reads: FineReads) -> None:
        self._reads = reads

    def seek(self, query: Seek) -> Seeds:
        """A recall's direct hits on every channel (see ``StorageBackend.seek``)."""
        seeds = Seeds(total=self._reads.count_engrams())
        if query.vector is not None:
            hits = self._reads.vector_search(query.vector, query.k, query.memory_type)
            seeds.vector = [(i, s) for i, s in hits if s >= query.vector_floor]
        if query.text:
            seeds.text = self._reads.text_search(query.text, query.k, query.memory_type)
        named = self._reads.get_cues(query.cue_names) if query.cue_names else []
        matched = {c.id: 1.0 for c in named}
        types = {c.id: c.cue_type for c in named}
        for row in query.cue_vectors if query.cue_vectors is not None else ():
            for cue, sim in self._reads.cue_vector_search(row, query.cue_neighbours):
                if sim >= query.cue_similarity and matched.get(cue.id, -2.0) < sim:
                    matched[cue.id] = sim
                    types[cue.id] = cue.cue_type
        if matched:
            ids = sorted(matched)
            degrees = self._reads.cue_degrees(ids)
            members = self._reads.engrams_for_cues(ids, query.cue_fanout)
            seeds.cues = [
                CueMatch(c, matched[c], degrees.get(c, 0), members.get(c, []), types.get(c, ""))
                for c in ids
            ]
        return seeds

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` (see ``StorageBackend.neighbourhood``)."""
        ids = list(query.ids)
        around = Neighbourhood()
        if not ids:
            return around
        if query.edges > 0:
            around.associations = self._reads.associations_of(ids, query.edges)
        around.links = self._reads.cues_of(ids)
        cue_ids = sorted({link.cue_id for link in around.links})
        if not cue_ids:
            return around
        around.degrees = self._reads.cue_degrees(cue_ids)
        usable = [c for c in cue_ids if around.degrees.get(c, 0) <= query.cue_max_degree]
        if usable and query.engrams_per_cue > 0:
            around.members = self._reads.engrams_for_cues(usable, query.engrams_per_cue)
        return around
