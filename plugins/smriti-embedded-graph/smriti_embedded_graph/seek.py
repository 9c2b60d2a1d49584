"""The storage contract's coarse reads (``seek``, ``neighbourhood``) for Kùzu.

Composed from the finer reads of ``QueriesMixin`` (Kùzu queries, cues from memory).
They are the native path: a working set (``smriti.index``) answers recall once it is
loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti.backend import CueMatch, Expand, Neighbourhood, Seeds, Seek

if TYPE_CHECKING:
    from smriti_embedded_graph.backend import EmbeddedGraphBackend as _Self
else:
    _Self = object


class SeekMixin(_Self):  # type: ignore[misc,valid-type]
    """``seek`` and ``neighbourhood`` composed from the backend's finer reads."""

    def seek(self, query: Seek) -> Seeds:
        """A recall's direct hits on every channel (see ``StorageBackend.seek``)."""
        seeds = Seeds(total=self.count_engrams())
        if query.vector is not None:
            hits = self.vector_search(query.vector, query.k, query.memory_type)
            seeds.vector = [(i, s) for i, s in hits if s >= query.vector_floor]
        if query.text:
            seeds.text = self.text_search(query.text, query.k, query.memory_type)
        named = self.get_cues(query.cue_names) if query.cue_names else []
        matched = {c.id: 1.0 for c in named}
        types = {c.id: c.cue_type for c in named}
        for row in query.cue_vectors if query.cue_vectors is not None else ():
            for cue, sim in self.cue_vector_search(row, query.cue_neighbours):
                if sim >= query.cue_similarity and matched.get(cue.id, -2.0) < sim:
                    matched[cue.id] = sim
                    types[cue.id] = cue.cue_type
        if matched:
            ids = sorted(matched)
            degrees = self.cue_degrees(ids)
            members = self.engrams_for_cues(ids, query.cue_fanout)
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
            around.associations = self.associations_of(ids, query.edges)
        around.links = self.cues_of(ids)
        cue_ids = sorted({link.cue_id for link in around.links})
        if not cue_ids:
            return around
        around.degrees = self.cue_degrees(cue_ids)
        usable = [c for c in cue_ids if around.degrees.get(c, 0) <= query.cue_max_degree]
        if usable and query.engrams_per_cue > 0:
            around.members = self.engrams_for_cues(usable, query.engrams_per_cue)
        return around
