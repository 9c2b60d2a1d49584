"""The statements behind ``seek`` and ``neighbourhood``, and how their rows are read.

A statement is the ``CALL {}`` fragments of ``queries`` for the channels a read asks for
(a skipped channel is not in it) and one ``RETURN`` of their columns, so every read is a
single round trip. Vector channels use the HNSW index once it is operational and an
exact in-database scan before that. The index is shared by every user of a graph (and
every memory type), so it is asked for more candidates than needed and filtered before
the cut; the statement also says when the filter may have left hits out, and the
backend then asks again for that channel alone (a crowded tenant, a rare memory type).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np

from smriti.backend import (
    Association,
    CueMatch,
    Expand,
    Link,
    Neighbourhood,
    Seeds,
    Seek,
    normalise_cue_name,
    unit,
)
from smriti_backend_falkor import queries as Q
from smriti_backend_falkor.records import FloatList, association_from, fulltext_query, vector

Way = Literal["index", "exact"]
#: The text channel: the top of the matches by score, filtered after the cut, or every
#: match filtered before it (``queries.SEEK_TEXT`` and ``SEEK_TEXT_ALL``).
TextWay = Literal["top", "all"]

#: How the cue-merging fragment reads each cue source (constants, never user text).
_CUE_SOURCES = {
    "cue_name_hits": "cue_name_hits",
    "cue_rows": "reduce(acc = [], r IN cue_rows | acc + r)",
}


@dataclass(frozen=True, slots=True)
class SeekInput:
    """A ``Seek`` in the form the statement takes: unit vectors as lists, query text as
    a RediSearch OR-query, cue names normalised; empty channels are None or empty."""

    k: int
    vector: FloatList | None
    vector_floor: float
    text: str | None
    memory_type: str | None
    cue_names: list[str]
    cue_vectors: list[FloatList]
    cue_neighbours: int
    cue_similarity: float
    cue_fanout: int

    @classmethod
    def of(cls, query: Seek) -> SeekInput:
        """Normalise ``query``; channels that cannot match anything are dropped here."""
        k = max(int(query.k), 0)
        return cls(
            k=k,
            vector=_unit_list(query.vector) if k else None,
            vector_floor=float(query.vector_floor),
            text=fulltext_query(query.text or "") if k else None,
            memory_type=query.memory_type,
            cue_names=list(dict.fromkeys(normalise_cue_name(n) for n in query.cue_names)),
            cue_vectors=_cue_rows(query) if query.cue_neighbours > 0 else [],
            cue_neighbours=int(query.cue_neighbours),
            cue_similarity=float(query.cue_similarity),
            cue_fanout=max(int(query.cue_fanout), 0),
        )

    @property
    def dims(self) -> int:
        """The dimension of the query's vectors (0 when it has none)."""
        rows = [self.vector] if self.vector else self.cue_vectors
        return len(rows[0]) if rows else 0


def _unit_list(values: np.ndarray | None) -> FloatList | None:
    if values is None:
        return None
    v = unit(values)
    return vector(v) if np.any(v) else None


def _cue_rows(query: Seek) -> list[FloatList]:
    if query.cue_vectors is None:
        return []
    rows = np.asarray(query.cue_vectors, dtype=np.float32).reshape(-1, query.cue_vectors.shape[-1])
    return [r for r in map(_unit_list, rows) if r is not None]


@dataclass(frozen=True, slots=True)
class SeekPlan:
    """Which channels one seek statement asks, and how (index fetch size or exact scan)."""

    vector: Way | None = None
    vector_fetch: int = 0
    text: TextWay | None = None
    text_fetch: int = 0
    cue_names: bool = False
    cue_vectors: Way | None = None
    cue_fetch: int = 0
    total: bool = False

    @property
    def empty(self) -> bool:
        """True when the statement would ask nothing."""
        return not (self.vector or self.text or self.cue_names or self.cue_vectors or self.total)

    @property
    def uses_index(self) -> bool:
        """True when the statement calls an HNSW index (which a restart may have lost)."""
        return "index" in (self.vector, self.cue_vectors)

    def statement(self) -> tuple[str, list[str]]:
        """The Cypher text and the names of its columns."""
        return _statement(self.vector, self.text, self.cue_names, self.cue_vectors, self.total)

    def params(self, ask: SeekInput) -> dict[str, Any]:
        """The parameters the statement uses (only those: vectors are large)."""
        p: dict[str, Any] = {"k": ask.k, "memory_type": ask.memory_type}
        if self.vector:
            p.update(
                vector=ask.vector, vector_floor=ask.vector_floor, vector_fetch=self.vector_fetch
            )
        if self.text:
            p["text"] = ask.text
        if self.text == "top":
            p["text_fetch"] = self.text_fetch
        if self.cue_names:
            p["cue_names"] = ask.cue_names
        if self.cue_vectors:
            p.update(cue_vectors=ask.cue_vectors, cue_fetch=self.cue_fetch)
            p.update(cue_similarity=ask.cue_similarity, cue_neighbours=ask.cue_neighbours)
        if self.cue_names or self.cue_vectors:
            p["cue_fanout"] = ask.cue_fanout
        return p


@cache
def _statement(
    vector: Way | None,
    text: TextWay | None,
    cue_names: bool,
    cue_vectors: Way | None,
    total: bool,
) -> tuple[str, list[str]]:
    parts: list[str] = []
    columns: list[str] = []
    if vector:
        parts.append(Q.SEEK_VECTOR_INDEX if vector == "index" else Q.SEEK_VECTOR_EXACT)
        columns += ["vector_hits", "vector_eligible", "vector_worst", "vector_raw"]
    if text:
        parts.append(Q.SEEK_TEXT if text == "top" else Q.SEEK_TEXT_ALL)
        columns += ["text_hits", "text_raw"]
    sources: list[str] = []
    if cue_names:
        parts.append(Q.SEEK_CUE_NAMES)
        sources.append("cue_name_hits")
    if cue_vectors:
        index = cue_vectors == "index"
        parts.append(Q.SEEK_CUE_VECTORS_INDEX if index else Q.SEEK_CUE_VECTORS_EXACT)
        sources.append("cue_rows")
        columns.append("cue_short")
    if sources:
        matches = " + ".join(_CUE_SOURCES[s] for s in sources)
        cues = Q.SEEK_CUES.format(imports=", ".join(sources), matches=matches, top=Q.CUE_TOP)
        parts.append(cues)
        columns.append("cues")
    if total:
        parts.append(Q.SEEK_TOTAL)
        columns.append("total")
    return "".join(parts) + "RETURN " + ", ".join(columns), columns


@dataclass(slots=True)
class SeekAnswer:
    """One seek statement's row, by column name."""

    plan: SeekPlan
    row: dict[str, Any] = field(default_factory=dict)
    #: Engrams kept per matched cue (a cue's top list may hold more).
    fanout: int = 0

    def into(self, seeds: Seeds) -> None:
        """Copy the channels this statement asked into ``seeds``."""
        if self.plan.vector:
            seeds.vector = _best_first(self.row["vector_hits"])
        if self.plan.text:
            seeds.text = _best_first(self.row["text_hits"])
        if "cues" in self.row:
            seeds.cues = sorted(
                (
                    CueMatch(
                        cid,
                        float(sim),
                        int(degree),
                        by_importance(engrams)[: self.fanout],
                        cue_type or "",
                    )
                    for cid, sim, degree, engrams, cue_type in self.row["cues"]
                ),
                key=lambda c: (-c.similarity, c.cue_id),
            )
        if self.plan.total:
            seeds.total = int(self.row["total"])

    def vector_short(self, ask: SeekInput) -> bool:
        """True when a bigger index fetch could add vector hits: fewer than k passed the
        user/type filter, the index gave all it was asked for, and its worst candidate
        still clears the floor."""
        r = self.row
        return (
            self.plan.vector == "index"
            and int(r["vector_eligible"]) < ask.k
            and int(r["vector_raw"]) >= self.plan.vector_fetch
            and r["vector_worst"] is not None
            and float(r["vector_worst"]) >= ask.vector_floor
        )

    def next_vector_fetch(self, ask: SeekInput) -> int:
        """A fetch big enough for k hits at the share of the index the filter kept."""
        eligible = max(int(self.row["vector_eligible"]), 1)
        needed = math.ceil(2 * ask.k * int(self.row["vector_raw"]) / eligible)
        return max(self.plan.vector_fetch * 4, needed)

    def text_short(self, ask: SeekInput) -> bool:
        """True when the top of the matches held fewer than k of this user's (and type's)
        and there were more matches than it kept."""
        return (
            self.plan.text == "top"
            and len(self.row["text_hits"]) < ask.k
            and int(self.row["text_raw"]) >= self.plan.text_fetch
        )

    def cues_short(self) -> bool:
        """True when a query cue row may have near cues the index fetch did not reach."""
        return self.plan.cue_vectors == "index" and bool(self.row["cue_short"])


def by_importance(rows: list[list[Any]]) -> list[tuple[str, float]]:
    """(engram id, strength) from [id, strength, importance] rows, most important first
    (ties by id): the statements choose these engrams but cannot keep their order."""
    ordered = sorted(rows, key=lambda r: (-float(r[2]), r[0]))
    return [(str(i), float(s)) for i, s, _ in ordered]


def _best_first(hits: list[list[Any]]) -> list[tuple[str, float]]:
    pairs = [(str(i), float(s)) for i, s in hits if not math.isnan(float(s))]
    return sorted(pairs, key=lambda p: (-p[1], p[0]))


# -- neighbourhood ---------------------------------------------------------------------
@cache
def neighbourhood_statement(edges: bool) -> str:
    """One hop: association edges (when asked) and cue links, degrees and members."""
    parts = [Q.NEIGHBOURS_OUT, Q.NEIGHBOURS_IN] if edges else []
    columns = ["outgoing", "incoming"] if edges else []
    parts.append(Q.NEIGHBOURS_CUES)
    columns.append("cues")
    return "".join(parts) + "RETURN " + ", ".join(columns)


def neighbourhood_params(query: Expand) -> dict[str, Any]:
    """Parameters of ``neighbourhood_statement`` (ids deduplicated)."""
    return {
        "ids": list(dict.fromkeys(query.ids)),
        "edges": max(int(query.edges), 0),
        "cue_max_degree": int(query.cue_max_degree),
        "engrams_per_cue": max(int(query.engrams_per_cue), 0),
    }


def read_neighbourhood(query: Expand, row: list[Any]) -> Neighbourhood:
    """A ``Neighbourhood`` from the row of ``neighbourhood_statement``."""
    out = Neighbourhood()
    if query.edges > 0:
        outgoing, incoming, cues = row
        out.associations = _associations(outgoing, incoming)
    else:
        (cues,) = row
    for cid, encoded, degree, members in cues:
        out.links.extend(Link(e, cid, float(s)) for e, s in encoded)
        out.degrees[cid] = int(degree)
        if degree <= query.cue_max_degree:
            out.members[cid] = by_importance(members)[: max(int(query.engrams_per_cue), 0)]
    return out


def _associations(outgoing: list[Any], incoming: list[Any]) -> list[Association]:
    seen: dict[tuple[str, str, str], Association] = {}
    for src, edges in outgoing:
        for tgt, strength, rel, created in edges:
            a = association_from(src, tgt, strength, rel, created)
            seen.setdefault((a.source_id, a.target_id, a.relation_type), a)
    for tgt, edges in incoming:
        for src, strength, rel, created in edges:
            a = association_from(src, tgt, strength, rel, created)
            seen.setdefault((a.source_id, a.target_id, a.relation_type), a)
    return list(seen.values())
