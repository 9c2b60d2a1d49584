"""The two coarse reads, ``seek`` and ``neighbourhood``, each one Cypher query (the
backend may send a seek's engram vector channel as a second one at the same time).

A statement is assembled from the constant fragments below, chosen by the channels a
request uses and the vector indexes that exist; every value is a parameter, never text.
Each channel is a ``CALL`` subquery ending in an aggregation, so it yields exactly one
row and the query returns one row with a column per channel.

Shared (tenant) vector indexes hold every user's nodes, so hits are filtered by user and
memory type before the cut. The engram channel asks the index for ``max(k * OVERFETCH,
MIN_FETCH)`` hits; only when too few of them are the user's, the index had more to give
and its lowest score was still above the floor does a second stage ask for
``MAX_FETCH``, and only when that is not enough either an exact scan of the user's own
engrams runs (the guards make the skipped stages cost nothing). Cue rows do the same with
one index stage and the exact scan. Scores inside the query are Neo4j's normalised
cosine ``(1 + cos) / 2``; the parsers convert them back to cosine similarity.

Reads are read-committed: a node that a concurrent forget deletes while the query reads
it comes back with null properties. Such rows are dropped, as if the read had come a
moment later.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from smriti.backend import (
    Association,
    CueMatch,
    Expand,
    Link,
    Neighbourhood,
    Seeds,
    Seek,
    cosine_top_k,
)
from smriti_backend_neo4j.cypher import ENGRAM_TEXT_INDEX, engram_map
from smriti_backend_neo4j.records import association_from, lucene_query, vector_from, vector_param

OVERFETCH, MIN_FETCH, MAX_FETCH = 4, 64, 4096
#: The engram channel's first stage asks the index for about ``VECTOR_OVERFETCH * k``
#: of the user's hits, at least ``VECTOR_MIN_FETCH`` in all: ``VECTOR_OVERFETCH * k /
#: share``, where ``share`` is the part of the previous query's hits that were the
#: user's (``SHARE_UNKNOWN`` before the first). An index query's cost grows with the hits
#: it returns (120 instead of 64 cost about 4 ms at 100k memories), and in a database a
#: user has to itself the fixed ``OVERFETCH`` only paid for other users' rows that were
#: not there. At 100k memories recall returned the same results (98 queries); a store's
#: neighbours (k = 10) need the minimum: 32 lost some of them.
VECTOR_OVERFETCH, VECTOR_MIN_FETCH, SHARE_UNKNOWN = 2, 64, 0.5
#: The cue channel's smallest index fetch. A recall asks for the 3 nearest cues of each
#: of its cue vectors, and an index query's cost grows with the hits it must return
#: (64 instead of 16 took about 2 ms more per vector at 100k memories); a stage that
#: brings too few of the user's cues above the floor falls back to the exact scan.
CUE_MIN_FETCH = 16
#: Vector candidates returned beyond ``k``, rescored here (see ``rescored``).
RESCORE_MARGIN = 8

_MINE = "node.user = $user AND ($memory_type IS NULL OR node.memory_type = $memory_type)"

# -- seek: engram vector channel -----------------------------------------------------------
# v1 holds the index's hits that are the user's; v1_done says whether they suffice.
VECTOR_STAGE_1 = f"""
CALL () {{
  CALL db.index.vector.queryNodes($engram_index, $fetch, $vector) YIELD node, score
  WITH count(*) AS raw, min(score) AS lowest, collect(CASE WHEN {_MINE} THEN node END) AS nodes
  WITH raw, lowest, nodes,
       [n IN nodes[0..$k_fetch] | [n.id, coalesce(n.embedding_f32, n.embedding)]] AS hits
  RETURN hits AS v1, size(nodes) >= $k OR raw < $fetch OR lowest < $vector_floor AS v1_done,
         [size(nodes), raw] AS share
}}
"""
VECTOR_STAGE_2 = f"""
CALL (v1_done) {{
  WITH v1_done WHERE NOT v1_done
  CALL db.index.vector.queryNodes($engram_index, $fetch_max, $vector) YIELD node, score
  WITH count(*) AS raw, min(score) AS lowest, collect(CASE WHEN {_MINE} THEN node END) AS nodes
  WITH raw, lowest, nodes,
       [n IN nodes[0..$k_fetch] | [n.id, coalesce(n.embedding_f32, n.embedding)]] AS hits
  RETURN hits AS v2, size(nodes) >= $k OR raw < $fetch_max OR lowest < $vector_floor AS v2_done
}}
"""
# The exact scans seek the user's nodes through ``owner``: a guard written as a WHERE
# would be planned after the index seek, which then reads every id of the user's nodes.
_VECTOR_EXACT_BODY = """
  MATCH (e:Engram {user: owner})
  WHERE e.embedding IS NOT NULL AND ($memory_type IS NULL OR e.memory_type = $memory_type)
  WITH e, vector.similarity.cosine(e.embedding, $vector) AS score
  WHERE score >= $vector_floor
  WITH e, score ORDER BY score DESC, e.id LIMIT $k_fetch
  RETURN collect([e.id, coalesce(e.embedding_f32, e.embedding)]) AS v3
"""
VECTOR_EXACT_FALLBACK = f"""
CALL (v1_done, v2_done) {{
  UNWIND CASE WHEN v1_done OR v2_done THEN [] ELSE [$user] END AS owner
{_VECTOR_EXACT_BODY}}}
WITH *, CASE WHEN v1_done THEN v1 WHEN v2_done THEN v2 ELSE v3 END AS vector
"""
VECTOR_EXACT = f"""
CALL () {{
  WITH $user AS owner
{_VECTOR_EXACT_BODY}}}
WITH *, v3 AS vector
"""

# The engrams of the vector candidates, without embeddings (``nearest_engrams``): looked up
# by the (user, id) constraint's index, a few microseconds each.
VECTOR_ENGRAMS = f"""
CALL (vector) {{
  UNWIND vector AS hit
  MATCH (n:Engram {{user: $user, id: hit[0]}})
  RETURN collect({engram_map("n", embeddings=False)}) AS engrams
}}
"""

# -- seek: lexical channel -------------------------------------------------------------------
# Full-text hits are cheap: when the first $text_fetch hold too few of the user's, the
# second stage reads every match.
TEXT_STAGES = f"""
CALL () {{
  CALL db.index.fulltext.queryNodes('{ENGRAM_TEXT_INDEX}', $text, {{limit: $text_fetch}})
    YIELD node, score
  WITH count(*) AS raw, collect(CASE WHEN {_MINE} THEN [node.id, score] END) AS hits
  RETURN hits AS t1, size(hits) >= $k OR raw < $text_fetch AS t1_done
}}
CALL (t1_done) {{
  WITH t1_done WHERE NOT t1_done
  CALL db.index.fulltext.queryNodes('{ENGRAM_TEXT_INDEX}', $text) YIELD node, score
  RETURN collect(CASE WHEN {_MINE} THEN [node.id, score] END) AS t2
}}
WITH *, CASE WHEN t1_done THEN t1 ELSE t2 END AS text
"""

# -- seek: cue channel -----------------------------------------------------------------------
CUE_BY_NAME = """
    UNWIND $cue_names AS key
    MATCH (c:Cue {user: $user, key: key})
    RETURN c, 1.0 AS sim
"""
_CUE_EXACT_BODY = """
      MATCH (c:Cue {user: owner})
      WHERE c.embedding IS NOT NULL
      WITH c, vector.similarity.cosine(c.embedding, v) AS sim
      WHERE sim >= $cue_floor
      RETURN c, sim ORDER BY sim DESC, c.id LIMIT $cue_neighbours
"""
CUE_BY_VECTOR_EXACT = f"""
    UNWIND $cue_vectors AS v
    CALL (v) {{
      WITH v, $user AS owner{_CUE_EXACT_BODY}    }}
    RETURN c, sim
"""
# The index yields its hits best first, so the exact cosine (the order every backend
# agrees on) is computed for the first ``cue_neighbours + RESCORE_MARGIN`` of them only:
# reading the embedding list of every candidate cost as much as the index search.
CUE_BY_VECTOR_INDEX = f"""
    UNWIND $cue_vectors AS v
    CALL (v) {{
      CALL db.index.vector.queryNodes($cue_index, $cue_fetch, v) YIELD node, score
      WITH count(*) AS raw, min(score) AS lowest,
           collect(CASE WHEN node.user = $user THEN node END) AS nodes
      RETURN nodes, size(nodes) >= $cue_neighbours OR raw < $cue_fetch
             OR lowest < $cue_floor AS done
    }}
    CALL (v, nodes, done) {{
      WITH v, nodes WHERE done
      UNWIND nodes[0..$cue_rescore] AS c
      WITH c, vector.similarity.cosine(c.embedding, v) AS sim
      WHERE sim >= $cue_floor
      RETURN c, sim ORDER BY sim DESC, c.id LIMIT $cue_neighbours
      UNION ALL
      UNWIND CASE WHEN done THEN [] ELSE [$user] END AS owner
      WITH v, owner{_CUE_EXACT_BODY}    }}
    RETURN c, sim
"""
# A cue's most important engrams (ties by id): the first entries of the EncodedBy rank
# index for the cue (rank = -importance), so a hub cue costs its N entries, not a read
# of every member. Only the user's engrams have EncodedBy edges to the user's cues.
MEMBERS = """
    MATCH ()-[r:EncodedBy]->()
    WHERE r.user = $user AND r.cue = {cue} AND r.rank IS NOT NULL AND r.eid IS NOT NULL
    WITH r ORDER BY r.user, r.cue, r.rank, r.eid LIMIT {limit}
    RETURN collect([r.eid, r.strength]) AS {name}
"""
# The best similarity per matched cue, its degree (from the degree store: only engrams
# have EncodedBy edges) and its most important engrams.
CUES = """
CALL () {{
  CALL () {{{branches}  }}
  WITH c, max(sim) AS sim
  CALL (c) {{{members}  }}
  RETURN collect([c.id, sim, COUNT {{ (c)<-[:EncodedBy]-() }}, engrams, c.cue_type]) AS cues
}}
"""
TOTAL = """
CALL () {
  MATCH (e:Engram {user: $user})
  RETURN count(e) AS total
}
"""


def seek_statement(
    query: Seek,
    user: str,
    engram_index: str | None,
    cue_index: str | None,
    *,
    total: bool = True,
    engrams: bool = False,
    share: float = SHARE_UNKNOWN,
) -> tuple[str, dict[str, Any]] | None:
    """The statement and parameters answering ``query``; None when nothing is asked.
    ``engram_index`` and ``cue_index`` name usable vector indexes of the right width;
    ``engrams`` adds an ``engrams`` column: the vector candidates' engram projections.
    ``share`` sizes the index fetch (``VECTOR_OVERFETCH``); with an index, the ``share``
    column holds [the user's hits, all hits] of the first stage."""
    k = int(query.k)
    params: dict[str, Any] = {"user": user, "k": k, "memory_type": query.memory_type}
    parts: list[str] = []
    columns: list[str] = []
    if k > 0 and query.vector is not None:
        params["vector"] = vector_param(query.vector)
        params["vector_floor"] = _normalised(query.vector_floor)
        params["k_fetch"] = k + RESCORE_MARGIN
        if engram_index is not None:
            fetch = min(MAX_FETCH, max(math.ceil(VECTOR_OVERFETCH * k / share), VECTOR_MIN_FETCH))
            params.update(engram_index=engram_index, fetch=fetch, fetch_max=MAX_FETCH)
            parts += [VECTOR_STAGE_1, VECTOR_STAGE_2, VECTOR_EXACT_FALLBACK]
            columns.append("share")
        else:
            parts.append(VECTOR_EXACT)
        columns.append("vector")
        if engrams:
            parts.append(VECTOR_ENGRAMS)
            columns.append("engrams")
    lucene = lucene_query(query.text or "") if k > 0 else ""
    if lucene:
        params.update(text=lucene, text_fetch=_fetch(k))
        parts.append(TEXT_STAGES)
        columns.append("text")
    branches = _cue_branches(query, cue_index, params)
    if branches:
        members = MEMBERS.format(cue="c.id", limit="$cue_fanout", name="engrams")
        parts.append(CUES.format(branches="\n    UNION ALL\n".join(branches), members=members))
        columns.append("cues")
    if total:
        parts.append(TOTAL)
        columns.append("total")
    if not parts:
        return None
    return "".join(parts) + "RETURN " + ", ".join(columns), params


def _cue_branches(query: Seek, cue_index: str | None, params: dict[str, Any]) -> list[str]:
    branches: list[str] = []
    names = list(dict.fromkeys(query.cue_names))
    if names:
        params["cue_names"] = names
        branches.append(CUE_BY_NAME)
    rows = _rows(query.cue_vectors)
    if rows and query.cue_neighbours > 0:
        params.update(
            cue_vectors=rows,
            cue_neighbours=int(query.cue_neighbours),
            cue_floor=_normalised(query.cue_similarity),
        )
        if cue_index is not None:
            params.update(
                cue_index=cue_index,
                cue_fetch=_fetch(int(query.cue_neighbours), CUE_MIN_FETCH),
                cue_rescore=int(query.cue_neighbours) + RESCORE_MARGIN,
            )
            branches.append(CUE_BY_VECTOR_INDEX)
        else:
            branches.append(CUE_BY_VECTOR_EXACT)
    if branches:
        params["cue_fanout"] = max(0, int(query.cue_fanout))
    return branches


def _rows(vectors: np.ndarray | None) -> list[list[float]]:
    if vectors is None:
        return []
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.size == 0:
        return []
    return matrix.reshape(matrix.shape[0] if matrix.ndim > 1 else 1, -1).tolist()


def _fetch(k: int, least: int = MIN_FETCH) -> int:
    return max(k * OVERFETCH, least)


def _normalised(cosine: float) -> float:
    """A cosine similarity on Neo4j's ``(1 + cos) / 2`` scale."""
    return (1.0 + float(cosine)) / 2.0


def cosine(normalised_score: float) -> float:
    """Neo4j's cosine score ``(1 + cos) / 2`` back to the cosine similarity."""
    return min(1.0, 2.0 * float(normalised_score) - 1.0)


def rescored(rows: Sequence[Sequence[Any]], vector: Any) -> list[tuple[str, float]]:
    """(id, cosine) of the vector candidates ``rows`` ([id, embedding bytes or list]),
    best first, ties by id.

    Neo4j orders the candidates by its own float arithmetic; the scores returned are
    computed here, as ``smriti.backend.cosine_top_k`` computes them over unit float32
    rows, so that memories whose similarity differs only in the last bits rank as they
    do on every other backend (the statement returns ``RESCORE_MARGIN`` more than ``k``
    for that)."""
    found = [(i, vector_from({"embedding_f32": v} if isinstance(v, bytes) else {"embedding": v}))
             for i, v in rows if i is not None and v is not None]  # fmt: skip
    found = [(i, v) for i, v in found if v is not None and v.size == np.asarray(vector).size]
    if not found:
        return []
    matrix = np.stack([v for _, v in found]).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms > 0, norms, 1.0)
    hits = [(found[row][0], score) for row, score in cosine_top_k(matrix, vector, len(found))]
    return sorted(hits, key=lambda h: (-h[1], h[0]))


def seeds_from(record: Any, query: Seek) -> Seeds:
    """The ``Seeds`` in one record of a ``seek_statement``."""
    seeds = Seeds(total=int(record.get("total") or 0))
    k = int(query.k)
    hits = rescored(record.get("vector") or (), query.vector)
    seeds.vector = [h for h in hits if h[1] >= query.vector_floor][:k]
    text = [(i, float(s)) for i, s in record.get("text") or () if i is not None and s]
    seeds.text = sorted(text, key=lambda h: -h[1])[:k]
    for cue_id, sim, degree, engrams, cue_type in record.get("cues") or ():
        if cue_id is None or sim is None:
            continue
        members = [(e, float(s)) for e, s in engrams if e is not None and s is not None]
        seeds.cues.append(CueMatch(cue_id, cosine(sim), int(degree or 0), members, cue_type or ""))
    seeds.cues.sort(key=lambda m: (-m.similarity, m.cue_id))
    return seeds


# -- neighbourhood ---------------------------------------------------------------------------
NEIGHBOURHOOD_EDGES = """
CALL (e) {
  MATCH (e)-[r:AssociatedWith]->(o:Engram)
  WITH o, r ORDER BY r.strength DESC, o.id LIMIT $edges
  RETURN collect([e.id, o.id, r.strength, r.relation_type,
    r.created_at.epochSeconds * 1000000 + r.created_at.microsecond]) AS outgoing
}
CALL (e) {
  MATCH (e)<-[r:AssociatedWith]-(o:Engram)
  WITH o, r ORDER BY r.strength DESC, o.id LIMIT $edges
  RETURN collect([o.id, e.id, r.strength, r.relation_type,
    r.created_at.epochSeconds * 1000000 + r.created_at.microsecond]) AS incoming
}
"""
NO_EDGES = "WITH e, [] AS outgoing, [] AS incoming\n"
NEIGHBOURHOOD = """
UNWIND $ids AS eid
MATCH (e:Engram {{user: $user, id: eid}})
{edges}CALL (e) {{
  MATCH (e)-[r:EncodedBy]->(c:Cue)
  RETURN collect(c) AS cues, collect([e.id, c.id, r.strength]) AS links
}}
WITH collect(outgoing + incoming) AS edges, collect(links) AS links, collect(cues) AS cues
CALL (cues) {{
  UNWIND cues AS some
  UNWIND some AS c
  WITH DISTINCT c
  WITH c, COUNT {{ (c)<-[:EncodedBy]-() }} AS degree
  CALL (c, degree) {{
    UNWIND CASE WHEN degree <= $cue_max_degree THEN [c.id] ELSE [] END AS cid{members}  }}
  RETURN collect([c.id, degree, members]) AS degrees
}}
RETURN edges, links, degrees
"""


def neighbourhood_statement(query: Expand, user: str) -> tuple[str, dict[str, Any]] | None:
    """The statement and parameters answering ``query``; None when ``ids`` is empty."""
    ids = list(dict.fromkeys(query.ids))
    if not ids:
        return None
    edges = max(0, int(query.edges))
    statement = NEIGHBOURHOOD.format(
        edges=NEIGHBOURHOOD_EDGES if edges else NO_EDGES,
        # The degree guard is an UNWIND, not a WHERE: the planner would apply a WHERE
        # after the index seek, which then reads every member of every hub cue.
        members=MEMBERS.format(cue="cid", limit="$engrams_per_cue", name="members"),
    )
    params = {
        "user": user,
        "ids": ids,
        "edges": edges,
        "cue_max_degree": int(query.cue_max_degree),
        "engrams_per_cue": max(0, int(query.engrams_per_cue)),
    }
    return statement, params


def neighbourhood_from(record: Any, query: Expand) -> Neighbourhood:
    """The ``Neighbourhood`` in the record of a ``neighbourhood_statement``."""
    around = Neighbourhood()
    seen: dict[tuple[str, str, str], Association] = {}
    for rows in record["edges"]:
        for row in rows:
            if None in row[:3]:
                continue
            edge = association_from(row)
            seen.setdefault((edge.source_id, edge.target_id, edge.relation_type), edge)
    around.associations = list(seen.values())
    around.links = [
        Link(eid, cid, float(s)) for rows in record["links"] for eid, cid, s in rows
        if eid is not None and cid is not None and s is not None
    ]  # fmt: skip
    for cue_id, degree, members in record["degrees"]:
        if cue_id is None:
            continue
        around.degrees[cue_id] = int(degree or 0)
        if around.degrees[cue_id] <= query.cue_max_degree:
            around.members[cue_id] = _members(members)
    return around


def _members(rows: Sequence[Sequence[Any]]) -> list[tuple[str, float]]:
    return [(e, float(s)) for e, s in rows if e is not None and s is not None]
