"""Every Cypher statement the FalkorDB backend runs.

All values arrive as parameters; ``$user`` scopes every match, in both isolation modes.
Statements return scalars only, never nodes, so the client's cached graph schema is
never consulted (it goes stale when a server restarts).

FalkorDB specifics these statements respect: no ``EXISTS {}`` subqueries and no
``datetime()`` (timestamps are fixed-width ISO-8601 UTC strings, which sort correctly);
embeddings are stored with ``vecf32(...)``; ``OPTIONAL MATCH ... WITH x WHERE x IS
NULL`` does not filter on this FalkorDB version, so guards count instead.
"""

from __future__ import annotations

from smriti_backend_falkor.records import EPOCH

#: An engram's access fields and cluster, once recall or consolidation changed them, are
#: on its ``Usage`` self-loop ``u`` (bound with ``OPTIONAL MATCH (e)-[u:Usage]->(e)``):
#: any SET on an Engram node re-indexes it in the vector and full-text indexes (about
#: 2 ms per node, see MIGRATE_V2), an edge property costs microseconds. Importance stays
#: on the node, where the cue statements sort by it.
ACCESS_COLUMNS = (
    "coalesce(u.access_count, e.access_count), "
    "coalesce(u.last_accessed_at, e.last_accessed_at), coalesce(u.decay_factor, e.decay_factor)"
)
USAGE = "OPTIONAL MATCH (e)-[u:Usage]->(e)"
#: The version fields are missing on nodes written before schema version 4, the origin
#: fields on those written before version 5 (see MIGRATIONS): they read as "" and null.
#: The embedding is read from its base64 copy (``records.packed``), and from the vector
#: itself on engrams written before the copy existed.
ENGRAM_COLUMNS = (
    "e.id, e.content, e.summary, e.memory_type, e.importance, "
    "coalesce(u.access_count, e.access_count), e.created_at, "
    "coalesce(u.last_accessed_at, e.last_accessed_at), coalesce(u.decay_factor, e.decay_factor), "
    "coalesce(e.embedding_b64, e.embedding), e.source, e.tags, "
    "coalesce(u.cluster_id, e.cluster_id), "
    "coalesce(e.supersedes, ''), coalesce(e.superseded_by, ''), e.superseded_at, "
    "coalesce(e.origin, ''), coalesce(e.principal, '')"
)
CUE_COLUMNS = "q.id, q.name, q.cue_type, q.embedding"

# -- schema -----------------------------------------------------------------------------
LIST_INDEXES = (
    "CALL db.indexes() YIELD label, properties, types, options, entitytype, status "
    "RETURN label, properties, types, options, entitytype, status"
)
RANGE_INDEXES = (
    ("Engram", "user"),
    ("Engram", "id"),
    ("Cue", "user"),
    ("Cue", "id"),
    ("Cue", "key"),
    ("SmritiMeta", "user"),
)
FULLTEXT_LABEL = "Engram"
FULLTEXT_FIELDS = ("content", "summary", "tags_text")

# -- metadata ---------------------------------------------------------------------------
GET_META = "MATCH (m:SmritiMeta {user: $user, key: $key}) RETURN m.value"
SET_META = "MERGE (m:SmritiMeta {user: $user, key: $key}) SET m.value = $value"

#: The SmritiMeta node whose ``count`` is the user's engram count, kept by every write
#: that creates or deletes engrams (a count through the ``user`` index reads every node).
ENGRAM_COUNT_KEY = "falkordb.engrams"

# -- migrations -------------------------------------------------------------------------
MIGRATE_V1 = """
MATCH (e:Engram {user: $user})
WHERE e.cluster_id IS NULL OR e.tags_text IS NULL OR e.source IS NULL
SET e.cluster_id = coalesce(e.cluster_id, -1),
    e.tags = coalesce(e.tags, []),
    e.tags_text = coalesce(e.tags_text, ''),
    e.source = coalesce(e.source, '')
"""

#: Version 2: every cue's degree (its EncodedBy edges) is the ``n`` of a ``Degree``
#: self-loop, kept by every write of links, and the engram count has its own node.
#: ``indegree`` walks the edges (milliseconds for a hub cue), and FalkorDB evaluates
#: every argument of ``coalesce`` and ``CASE``, so it cannot even be a fallback. The
#: count is not a Cue property because any SET on a node of a vector-indexed label
#: re-indexes the node (about 2 ms); an edge property costs microseconds.
MIGRATE_V2 = f"""
MATCH (q:Cue {{user: $user}})
MERGE (q)-[d:Degree]->(q)
SET d.n = indegree(q, 'EncodedBy')
WITH count(q) AS cues
OPTIONAL MATCH (e:Engram {{user: $user}})
WITH count(e) AS engrams
MERGE (m:SmritiMeta {{user: $user, key: '{ENGRAM_COUNT_KEY}'}})
SET m.count = engrams
"""

#: A cue's most important engrams are kept on its Degree loop: ``d.top`` holds
#: [engram id, EncodedBy strength, importance] of its ``CUE_TOP`` most important members
#: (ties by id; in no particular order), exact while ``d.fresh`` is true, so a hub cue's
#: fanout costs one edge read instead of reading and sorting every member. Stores keep it
#: (``TOP_INSERT``); deletes drop their engrams from it, and a write that may have pushed
#: an unknown member into the top (a delete from a full list, an importance change, a
#: bulk import) sets ``d.fresh = false``; ``REFRESH_TOPS`` rebuilds such lists, and reads
#: scan the members of a cue whose list is not fresh.
CUE_TOP = 64
#: ``grown`` (the list with the new member) cut back to CUE_TOP by dropping its least
#: important member (lowest importance, then highest id).
TOP_INSERT = f"""
  WITH e, q, d, coalesce(d.top, []) + [[e.id, 1.0, e.importance]] AS grown
  WITH e, q, d, grown,
       reduce(w = grown[0], t IN grown |
              CASE WHEN t[2] < w[2] OR (t[2] = w[2] AND t[0] > w[0]) THEN t ELSE w END) AS worst
  SET d.top = CASE WHEN size(grown) <= {CUE_TOP} THEN grown
                   ELSE [t IN grown WHERE t[0] <> worst[0]] END
"""
#: Version 3: every cue's top list (built by REFRESH_TOPS after this).
MIGRATE_V3 = """
MATCH (q:Cue {user: $user})-[d:Degree]->(q)
SET d.fresh = false
"""
#: Each schema version and the idempotent statements that bring a store from the
#: version before it to it; ``open`` runs those above the store's version, in order.
#: Version 4 (engrams carry ``supersedes``, ``superseded_by``, ``superseded_at``)
#: rewrites nothing: every read coalesces a missing one to "" / null, and writing them
#: onto every old node would re-index each one (about 1-2 ms a node, see MIGRATE_V2:
#: minutes at 100k memories, all of it inside ``open``). Version 5 (``origin``,
#: ``principal``) likewise: a missing one reads as "" (unknown).
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (MIGRATE_V1,)),
    (2, (MIGRATE_V2,)),
    (3, (MIGRATE_V3,)),
    (4, ()),
    (5, ()),
)
#: Rebuild up to $batch stale top lists; returns how many were rebuilt.
REFRESH_TOPS = f"""
MATCH (q:Cue {{user: $user}})-[d:Degree]->(q)
WHERE d.fresh IS NULL OR d.fresh = false
WITH q, d
LIMIT $batch
CALL {{
  WITH q
  MATCH (q)<-[l:EncodedBy]-(m:Engram)
  WITH m, l
  ORDER BY m.importance DESC, m.id
  LIMIT {CUE_TOP}
  RETURN collect([m.id, l.strength, m.importance]) AS top
}}
SET d.top = top, d.fresh = true
RETURN count(d)
"""
#: The cues of these engrams: their top lists may miss a member now.
STALE_TOPS_OF = """
UNWIND $ids AS id
MATCH (e:Engram {user: $user, id: id})-[:EncodedBy]->(q:Cue)-[d:Degree]->(q)
SET d.fresh = false
"""

# -- writes -----------------------------------------------------------------------------
# One statement, so FalkorDB applies all of it or (on any error) none of it, and one
# round trip: it returns the cues as stored (``CUE_COLUMNS`` rows). The guard makes a
# retry after a dropped connection a no-op (no row) instead of a duplicate. A stored cue's
# embedding is set only where it is missing: a SET re-indexes the node (see MIGRATE_V2).
ADD_MEMORY = f"""
OPTIONAL MATCH (old:Engram {{user: $user, id: $id}})
WITH count(old) AS existing
WHERE existing = 0
CREATE (e:Engram)
SET e = $props, e.embedding = vecf32($embedding)
FOREACH (_ IN [1] |
  MERGE (n:SmritiMeta {{user: $user, key: '{ENGRAM_COUNT_KEY}'}})
  SET n.count = coalesce(n.count, 0) + 1)
WITH e
CALL {{
  WITH e
  UNWIND $cues AS c
  MERGE (q:Cue {{user: $user, key: c.key}})
  ON CREATE SET q.id = c.id, q.name = c.name, q.cue_type = c.cue_type,
                q.embedding = vecf32(c.embedding)
  FOREACH (_ IN CASE WHEN q.embedding IS NULL THEN [1] ELSE [] END |
    SET q.embedding = vecf32(c.embedding))
  CREATE (e)-[:EncodedBy {{strength: 1.0, created_at: $now}}]->(q)
  MERGE (q)-[d:Degree]->(q)
  ON CREATE SET d.n = 0, d.top = [], d.fresh = true
  SET d.n = d.n + 1
{TOP_INSERT}
  RETURN collect(q) AS linked, collect([{CUE_COLUMNS}]) AS stored
}}
CALL {{
  WITH linked
  UNWIND linked AS a
  UNWIND linked AS b
  WITH a, b
  WHERE a <> b
  MERGE (a)-[co:CoOccurs]->(b)
  ON CREATE SET co.strength = 1.0
  ON MATCH SET co.strength = co.strength + 1.0
  RETURN count(co) AS pairs
}}
WITH e, stored
CALL {{
  WITH e
  UNWIND $assocs AS a
  MATCH (t:Engram {{user: $user, id: a.target}})
  MERGE (e)-[r:AssociatedWith]->(t)
  SET r.strength = a.strength, r.relation_type = a.relation_type, r.created_at = a.created_at
  RETURN count(r) AS associated
}}
RETURN stored
"""
CUES_OF_ENGRAM = (
    f"MATCH (e:Engram {{user: $user, id: $id}})-[:EncodedBy]->(q:Cue) RETURN {CUE_COLUMNS}"
)

#: Access fields and the cluster go to the Usage self-loop; the node is written only for
#: what lives on it (see ENGRAM_COLUMNS): a real importance change, new tags (their
#: ``tags_text`` copy re-indexes the node in the full-text index) and a supersession.
UPDATE_ENGRAMS = """
UNWIND $rows AS r
MATCH (e:Engram {user: $user, id: r.id})
WITH e, r, e.importance AS before
MERGE (e)-[u:Usage]->(e)
SET u.access_count = coalesce(r.access_count, u.access_count, e.access_count),
    u.last_accessed_at = coalesce(r.last_accessed_at, u.last_accessed_at, e.last_accessed_at),
    u.decay_factor = coalesce(r.decay_factor, u.decay_factor, e.decay_factor),
    u.cluster_id = coalesce(r.cluster_id, u.cluster_id, e.cluster_id)
FOREACH (_ IN CASE WHEN coalesce(r.importance, e.importance) <> e.importance
                   THEN [1] ELSE [] END |
  SET e.importance = r.importance)
FOREACH (_ IN CASE WHEN r.tags IS NULL THEN [] ELSE [1] END |
  SET e.tags = r.tags, e.tags_text = r.tags_text)
FOREACH (_ IN CASE WHEN r.superseded_by IS NULL THEN [] ELSE [1] END |
  SET e.superseded_by = r.superseded_by)
FOREACH (_ IN CASE WHEN r.superseded_at IS NULL THEN [] ELSE [1] END |
  SET e.superseded_at = r.superseded_at)
WITH e, r, before
WHERE r.importance IS NOT NULL AND r.importance <> before
MATCH (e)-[:EncodedBy]->(q:Cue)-[d:Degree]->(q)
SET d.fresh = false
"""
DELETE_ENGRAMS = f"""
UNWIND $ids AS id
MATCH (e:Engram {{user: $user, id: id}})
WITH collect(e) AS doomed
CALL {{
  WITH doomed
  UNWIND doomed AS e
  MATCH (e)-[:EncodedBy]->(q:Cue)
  WITH q, count(*) AS lost, collect(e.id) AS gone
  MATCH (q)-[d:Degree]->(q)
  WITH d, d.n - lost AS n, [t IN coalesce(d.top, []) WHERE NOT t[0] IN gone] AS kept
  SET d.n = n, d.top = kept,
      d.fresh = coalesce(d.fresh, false)
                AND size(kept) >= CASE WHEN n < {CUE_TOP} THEN n ELSE {CUE_TOP} END
  RETURN count(d) AS cues
}}
CALL {{
  WITH doomed
  MATCH (n:SmritiMeta {{user: $user, key: '{ENGRAM_COUNT_KEY}'}})
  SET n.count = n.count - size(doomed)
  RETURN count(n) AS counters
}}
UNWIND doomed AS e
DETACH DELETE e
RETURN count(*)
"""
DELETE_ORPHAN_CUES = """
MATCH (q:Cue {user: $user})
WHERE NOT (q)<-[:EncodedBy]-(:Engram)
DETACH DELETE q
RETURN count(*)
"""

#: ``$rows`` must not repeat an id (the count of new engrams relies on it).
IMPORT_ENGRAMS = f"""
UNWIND $rows AS r
OPTIONAL MATCH (old:Engram {{user: $user, id: r.props.id}})
WITH r, CASE WHEN old IS NULL THEN 1 ELSE 0 END AS fresh
MERGE (e:Engram {{user: $user, id: r.props.id}})
SET e = r.props, e.embedding = vecf32(r.embedding)
WITH e, fresh
OPTIONAL MATCH (e)-[u:Usage]->(e)
DELETE u
WITH sum(fresh) AS added
MERGE (n:SmritiMeta {{user: $user, key: '{ENGRAM_COUNT_KEY}'}})
SET n.count = coalesce(n.count, 0) + added
"""
IMPORT_CUES = """
UNWIND $rows AS r
MATCH (old:Cue {user: $user, id: r.id})
WHERE old.key <> r.key
DETACH DELETE old
"""
IMPORT_CUES_MERGE = """
UNWIND $rows AS r
MERGE (q:Cue {user: $user, key: r.key})
SET q.id = r.id, q.name = r.name, q.cue_type = r.cue_type, q.embedding = vecf32(r.embedding)
"""
#: ``$rows`` must not repeat an (engram, cue) pair (the degrees rely on it).
IMPORT_LINKS = """
UNWIND $rows AS r
MATCH (e:Engram {user: $user, id: r.engram_id}), (q:Cue {user: $user, id: r.cue_id})
OPTIONAL MATCH (e)-[old:EncodedBy]->(q)
WITH e, q, r, CASE WHEN old IS NULL THEN 1 ELSE 0 END AS fresh
MERGE (e)-[l:EncodedBy]->(q)
SET l.strength = r.strength, l.created_at = coalesce(l.created_at, $now)
MERGE (q)-[d:Degree]->(q)
ON CREATE SET d.n = 0
SET d.n = d.n + fresh, d.fresh = false
"""
IMPORT_ASSOCIATIONS = """
UNWIND $rows AS r
MATCH (a:Engram {user: $user, id: r.source_id}), (b:Engram {user: $user, id: r.target_id})
MERGE (a)-[x:AssociatedWith]->(b)
SET x.strength = r.strength, x.relation_type = r.relation_type, x.created_at = r.created_at
"""
IMPORT_COOCCURRENCES = """
UNWIND $rows AS r
MATCH (a:Cue {user: $user, id: r.source_id}), (b:Cue {user: $user, id: r.target_id})
MERGE (a)-[x:CoOccurs]->(b)
SET x.strength = r.strength
"""

# -- reads ------------------------------------------------------------------------------
GET_ENGRAMS = f"""
UNWIND $ids AS id
MATCH (e:Engram {{user: $user, id: id}})
{USAGE}
RETURN {ENGRAM_COLUMNS}
"""
#: GET_ENGRAMS without the embeddings (recall's candidate pool).
GET_ENGRAMS_BARE = GET_ENGRAMS.replace("coalesce(e.embedding_b64, e.embedding),", "null,")
#: ``smriti.backend.Listing``: every filter, then the page key, then the limit, all in the
#: statement. The key compares the timestamps as returned (``seen`` falls back to the
#: creation time and a missing time to the epoch, as ``records.engram_from_row`` does),
#: as strings at the stored microsecond precision, so a page's last engram fed back as
#: ``$after_*`` is never returned again. A null ``$after_seen`` starts at the top.
LIST_PAGE = f"""
MATCH (e:Engram {{user: $user}})
WHERE ($memory_type IS NULL OR e.memory_type = $memory_type)
  AND ($since IS NULL OR e.created_at >= $since)
  AND ($until IS NULL OR e.created_at < $until)
  AND ($include_superseded OR coalesce(e.superseded_by, '') = '')
  AND ($origin IS NULL OR coalesce(e.origin, '') = $origin
       OR ($origin_prefix AND coalesce(e.origin, '') STARTS WITH $origin))
  AND (size($tags) = 0
       OR ($all_tags AND all(t IN $tags WHERE t IN coalesce(e.tags, [])))
       OR (NOT $all_tags AND any(t IN $tags WHERE t IN coalesce(e.tags, []))))
{USAGE}
WITH e, u,
     coalesce(u.last_accessed_at, e.last_accessed_at, e.created_at, '{EPOCH}') AS seen,
     coalesce(e.created_at, '{EPOCH}') AS made
WHERE ($cluster_id IS NULL OR coalesce(u.cluster_id, e.cluster_id) = $cluster_id)
  AND ($after_seen IS NULL OR seen < $after_seen
       OR (seen = $after_seen AND (made < $after_made
                                   OR (made = $after_made AND e.id < $after_id))))
WITH e, u, seen, made
ORDER BY seen DESC, made DESC, e.id DESC
LIMIT $limit
RETURN {ENGRAM_COLUMNS}
"""
PAGE_ENGRAMS = f"""
MATCH (e:Engram {{user: $user}})
WHERE e.id > $after
WITH e
ORDER BY e.id
LIMIT $limit
{USAGE}
RETURN {ENGRAM_COLUMNS}
ORDER BY e.id
"""
PAGE_ENGRAM_STATS = f"""
MATCH (e:Engram {{user: $user}})
WHERE e.id > $after
WITH e
ORDER BY e.id
LIMIT $limit
{USAGE}
RETURN e.id, e.importance, {ACCESS_COLUMNS}, coalesce(u.cluster_id, e.cluster_id)
ORDER BY e.id
"""
PAGE_CUES = f"""
MATCH (q:Cue {{user: $user}})
WHERE q.id > $after
RETURN {CUE_COLUMNS}
ORDER BY q.id
LIMIT $limit
"""
COUNT_ENGRAMS = """
MATCH (e:Engram {user: $user})
WHERE $memory_type IS NULL OR e.memory_type = $memory_type
RETURN count(e)
"""
COUNT_CUES = "MATCH (q:Cue {user: $user}) RETURN count(q)"
COUNT_LINKS = "MATCH (:Engram {user: $user})-[l:EncodedBy]->(:Cue) RETURN count(l)"
COUNT_ASSOCIATIONS = "MATCH (:Engram {user: $user})-[x:AssociatedWith]->(:Engram) RETURN count(x)"
COUNT_COOCCURRENCES = "MATCH (:Cue {user: $user})-[x:CoOccurs]->(:Cue) RETURN count(x)"

GET_CUES = f"""
UNWIND $keys AS key
MATCH (q:Cue {{user: $user, key: key}})
RETURN {CUE_COLUMNS}
"""
GET_CUES_BY_ID = f"""
UNWIND $ids AS id
MATCH (q:Cue {{user: $user, id: id}})
RETURN {CUE_COLUMNS}
"""
PAGE_LINKS = """
MATCH (e:Engram {user: $user})-[l:EncodedBy]->(q:Cue)
WHERE e.id > $after_a OR (e.id = $after_a AND q.id > $after_b)
RETURN e.id, q.id, l.strength
ORDER BY e.id, q.id
LIMIT $limit
"""
PAGE_ASSOCIATIONS = """
MATCH (a:Engram {user: $user})-[x:AssociatedWith]->(b:Engram)
WHERE a.id > $after_a OR (a.id = $after_a AND b.id > $after_b)
RETURN a.id, b.id, x.strength, x.relation_type, x.created_at
ORDER BY a.id, b.id
LIMIT $limit
"""
PAGE_COOCCURRENCES = """
MATCH (a:Cue {user: $user})-[x:CoOccurs]->(b:Cue)
WHERE a.id > $after_a OR (a.id = $after_a AND b.id > $after_b)
RETURN a.id, b.id, x.strength
ORDER BY a.id, b.id
LIMIT $limit
"""

# -- recall reads: seek and neighbourhood ----------------------------------------------------
# ``smriti_backend_falkor.search`` joins the fragments a read needs into one statement:
# each is a ``CALL {}`` subquery that aggregates to exactly one row (so a channel with no
# hits cannot empty the result) and names its columns. Constant columns come after the
# aggregation: beside it they would be grouping keys, and no input would mean no row.
# Fragments hold no user text.

#: HNSW candidates, filtered by user and memory type before the cut. ``vector_eligible``
#: (hits that passed the filter), ``vector_worst`` and ``vector_raw`` (candidates the
#: index gave) tell the caller whether a bigger fetch could find more.
SEEK_VECTOR_INDEX = """
CALL {
  CALL db.idx.vector.queryNodes('Engram', 'embedding', $vector_fetch, vecf32($vector))
  YIELD node, score
  WITH node, 1.0 - score AS sim
  ORDER BY sim DESC, node.id
  WITH collect(CASE WHEN node.user = $user
                     AND ($memory_type IS NULL OR node.memory_type = $memory_type)
               THEN [node.id, sim] END) AS hits,
       min(sim) AS worst, count(node) AS raw
  RETURN [h IN hits WHERE h[1] >= $vector_floor][..$k] AS vector_hits,
         size(hits) AS vector_eligible, worst AS vector_worst, raw AS vector_raw
}
"""
#: The exact cosine scan of the user's own engrams (no index yet, or it gave too few).
SEEK_VECTOR_EXACT = """
CALL {
  UNWIND [vecf32($vector)] AS v
  MATCH (node:Engram {user: $user})
  WHERE node.embedding IS NOT NULL
    AND ($memory_type IS NULL OR node.memory_type = $memory_type)
  WITH node, 1.0 - vec.cosineDistance(node.embedding, v) AS sim
  WHERE sim = sim AND sim >= $vector_floor
  WITH node, sim
  ORDER BY sim DESC, node.id
  LIMIT $k
  WITH collect([node.id, sim]) AS hits
  RETURN hits AS vector_hits, $k AS vector_eligible, -1.0 AS vector_worst, 0 AS vector_raw
}
"""
#: The full-text top ``$text_fetch`` by score (ties by internal node id), then the user
#: and type filter on those alone: the procedure yields every match, unordered, and
#: reading a property of each (tens of thousands for a common word at 100k memories)
#: cost as much as the search itself, while the sort on score alone is a cheap heap.
#: The filter is a list comprehension because FalkorDB plans a ``WHERE`` on ``node``
#: where ``node`` is bound, before the sort and the limit. ``text_raw`` (matches the
#: fetch kept) tells the caller whether a crowded graph may have left hits out.
SEEK_TEXT = """
CALL {
  CALL db.idx.fulltext.queryNodes('Engram', $text)
  YIELD node, score
  WITH node, score
  ORDER BY score DESC, id(node)
  LIMIT $text_fetch
  WITH collect([node, score]) AS top, count(node) AS raw
  RETURN [t IN top WHERE t[0].user = $user
                     AND ($memory_type IS NULL OR t[0].memory_type = $memory_type)
          | [t[0].id, t[1]]][..$k] AS text_hits,
         raw AS text_raw
}
"""
#: Every match filtered by user and type, then the top k: exact however few of the
#: matches are this user's, for when SEEK_TEXT's fetch left too few.
SEEK_TEXT_ALL = """
CALL {
  CALL db.idx.fulltext.queryNodes('Engram', $text)
  YIELD node, score
  WITH node, score
  WHERE node.user = $user AND ($memory_type IS NULL OR node.memory_type = $memory_type)
  WITH node, score
  ORDER BY score DESC, id(node)
  LIMIT $k
  WITH collect([node.id, score]) AS hits
  RETURN hits AS text_hits, 0 AS text_raw
}
"""
SEEK_CUE_NAMES = """
CALL {
  UNWIND $cue_names AS key
  MATCH (q:Cue {user: $user, key: key})
  RETURN collect([q.id, 1.0]) AS cue_name_hits
}
"""
#: Per query cue row, the ``cue_neighbours`` nearest of the user's cues at or above
#: ``cue_similarity``; ``cue_short`` lists the rows a bigger fetch could add to.
SEEK_CUE_VECTORS_INDEX = """
CALL {
  UNWIND range(0, size($cue_vectors) - 1) AS i
  CALL db.idx.vector.queryNodes('Cue', 'embedding', $cue_fetch, vecf32($cue_vectors[i]))
  YIELD node, score
  WITH i, node, 1.0 - score AS sim
  ORDER BY sim DESC, node.id
  WITH i, collect(CASE WHEN node.user = $user AND sim >= $cue_similarity
                  THEN [node.id, sim] END) AS hits,
       min(sim) AS worst, count(node) AS raw
  RETURN collect(hits[..$cue_neighbours]) AS cue_rows,
         collect(CASE WHEN size(hits) < $cue_neighbours AND worst >= $cue_similarity
                       AND raw >= $cue_fetch THEN i END) AS cue_short
}
"""
SEEK_CUE_VECTORS_EXACT = """
CALL {
  UNWIND range(0, size($cue_vectors) - 1) AS i
  WITH i, vecf32($cue_vectors[i]) AS v
  MATCH (node:Cue {user: $user})
  WHERE node.embedding IS NOT NULL
  WITH i, node, 1.0 - vec.cosineDistance(node.embedding, v) AS sim
  WHERE sim = sim AND sim >= $cue_similarity
  WITH i, node, sim
  ORDER BY sim DESC, node.id
  WITH i, collect([node.id, sim]) AS hits
  WITH collect(hits[..$cue_neighbours]) AS rows
  RETURN rows AS cue_rows, [] AS cue_short
}
"""
#: Every matched cue once (best similarity), its degree and most important engrams (its
#: fresh top list, else a scan of its members, whose engrams are chosen before their edges
#: are bound (binding every edge of a hub cue
#: costs more than the rest of the statement), so their order is restored by the caller.
#: ``{imports}`` and ``{matches}`` are chosen from the constants in ``search``; ``{top}``
#: is CUE_TOP. The caller cuts the answer to the fanout.
SEEK_CUES = """
CALL {{
  WITH {imports}
  UNWIND {matches} AS m
  WITH m[0] AS cid, max(m[1]) AS sim
  MATCH (q:Cue {{user: $user, id: cid}})
  OPTIONAL MATCH (q)-[d:Degree]->(q)
  WITH q, sim, d,
       CASE WHEN coalesce(d.fresh, false) AND $cue_fanout <= {top} THEN null ELSE q END AS scan
  CALL {{
    WITH scan
    MATCH (scan)<-[:EncodedBy]-(e:Engram)
    WITH scan, e
    ORDER BY e.importance DESC, e.id
    LIMIT $cue_fanout
    MATCH (e)-[l:EncodedBy]->(scan)
    RETURN collect([e.id, l.strength, e.importance]) AS scanned
  }}
  RETURN collect([q.id, sim, coalesce(d.n, 0),
                  CASE WHEN scan IS NULL THEN d.top ELSE scanned END, q.cue_type]) AS cues
}}
"""
SEEK_TOTAL = f"""
CALL {{
  OPTIONAL MATCH (n:SmritiMeta {{user: $user, key: '{ENGRAM_COUNT_KEY}'}})
  RETURN coalesce(n.count, 0) AS total
}}
"""

NEIGHBOURS_OUT = """
CALL {
  UNWIND $ids AS id
  MATCH (a:Engram {user: $user, id: id})-[x:AssociatedWith]->(b:Engram)
  WITH a, b, x
  ORDER BY x.strength DESC, b.id
  WITH a, collect([b.id, x.strength, x.relation_type, x.created_at]) AS edges
  RETURN collect([a.id, edges[..$edges]]) AS outgoing
}
"""
NEIGHBOURS_IN = """
CALL {
  UNWIND $ids AS id
  MATCH (b:Engram {user: $user, id: id})<-[x:AssociatedWith]-(a:Engram)
  WITH a, b, x
  ORDER BY x.strength DESC, a.id
  WITH b, collect([a.id, x.strength, x.relation_type, x.created_at]) AS edges
  RETURN collect([b.id, edges[..$edges]]) AS incoming
}
"""
#: Each cue of the ids with the ids it encodes, its degree, and (degree at most
#: ``cue_max_degree``) its most important engrams, chosen as in ``SEEK_CUES`` (the caller
#: cuts them to ``engrams_per_cue``).
NEIGHBOURS_CUES = f"""
CALL {{
  UNWIND $ids AS id
  MATCH (e:Engram {{user: $user, id: id}})-[l:EncodedBy]->(q:Cue)
  WITH q, collect([e.id, l.strength]) AS encoded
  OPTIONAL MATCH (q)-[d:Degree]->(q)
  WITH q, d, encoded, coalesce(d.n, 0) AS degree
  WITH q, d, encoded, degree, CASE WHEN degree <= $cue_max_degree THEN q END AS small
  WITH q, d, encoded, degree, small,
       CASE WHEN coalesce(d.fresh, false) AND $engrams_per_cue <= {CUE_TOP}
            THEN null ELSE small END AS scan
  CALL {{
    WITH scan
    MATCH (scan)<-[:EncodedBy]-(m:Engram)
    WITH scan, m
    ORDER BY m.importance DESC, m.id
    LIMIT $engrams_per_cue
    MATCH (m)-[r:EncodedBy]->(scan)
    RETURN collect([m.id, r.strength, m.importance]) AS scanned
  }}
  RETURN collect([q.id, encoded, degree,
                  CASE WHEN small IS NULL THEN [] WHEN scan IS NULL THEN d.top
                       ELSE scanned END]) AS cues
}}
"""

# -- working set streams: windows of internal node ids, in no particular order ------------
# Every page of the id-ordered streams above sorts the rest of the user's nodes (the
# planner seeks the ``user`` index, then filters and sorts), so loading a working set
# from them at 100k memories took longer than ten minutes. A window of internal ids is a
# ``NodeByIdSeek``: the label and user are tested after it (as a WITH, so the planner
# does not turn them back into an index scan).
MAX_NODE_ID = "MATCH (n) RETURN max(id(n))"
_WINDOW = """
MATCH ({v}) WHERE id({v}) >= $lo AND id({v}) < $hi
WITH {v} WHERE {v}:{label} AND {v}.user = $user
"""
WINDOW_CUES = _WINDOW.format(v="q", label="Cue") + f"RETURN {CUE_COLUMNS}"
WINDOW_ENGRAMS = _WINDOW.format(v="e", label="Engram") + f"{USAGE}\nRETURN {ENGRAM_COLUMNS}"
WINDOW_LINKS = (
    _WINDOW.format(v="e", label="Engram")
    + "MATCH (e)-[l:EncodedBy]->(q:Cue) RETURN e.id, q.id, l.strength"
)
WINDOW_ASSOCIATIONS = (
    _WINDOW.format(v="a", label="Engram")
    + "MATCH (a)-[x:AssociatedWith]->(b:Engram) "
    + "RETURN a.id, b.id, x.strength, x.relation_type, x.created_at"
)
