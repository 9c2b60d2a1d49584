"""Every Cypher statement the Neo4j backend runs.

All values are parameters (``$user`` on every statement: tenant isolation); index names
are the constants below or parameters, never user text.

Nodes keep their embedding twice: ``embedding`` (a float list, for the vector index and
``vector.similarity.cosine``) and ``embedding_f32`` (little-endian float32 bytes). Reads
project the fields they need with the bytes and without the list, because the driver
decodes one byte string several times faster than a list of floats (and the server need
not load the list); nodes written before the bytes existed still return their list.
Timestamps are stored as ``DATETIME`` but read as microseconds since the epoch: the
driver builds each ``DateTime`` object slowly (about half a millisecond each).

The two recall reads, ``seek`` and ``neighbourhood``, are assembled from fragments in
``reads.py``.
"""


def at(pair: str) -> str:
    """Cypher for the ``DATETIME`` of an [epoch seconds, microseconds] parameter
    (``records.epoch_pair``); null stays null."""
    return (
        f"CASE WHEN {pair} IS NULL THEN NULL "
        f"ELSE datetime({{epochSeconds: {pair}[0], nanosecond: {pair}[1] * 1000}}) END"
    )


def micros(value: str) -> str:
    """Cypher for a ``DATETIME`` as microseconds since the epoch (what reads return)."""
    return f"{value}.epochSeconds * 1000000 + {value}.microsecond"


def times(node: str, props: str) -> str:
    """SET items storing an engram's timestamps, sent as [seconds, microseconds] in the
    map ``props``, as ``DATETIME`` (after ``SET node = props``; a null one stays unset)."""
    keys = ("created_at", "last_accessed_at", "superseded_at")
    return ", ".join(f"{node}.{k} = {at(props + '.' + k)}" for k in keys)


def engram_map(node: str, embeddings: bool = True) -> str:
    """Cypher for the projection of an engram node that ``records.engram_from`` reads:
    timestamps as microseconds, the version fields of nodes written before they existed
    as "" and null, the embedding as bytes (or the float list of older nodes) or null."""
    embedding = (
        f".embedding_f32, embedding: CASE WHEN {node}.embedding_f32 IS NULL "
        f"THEN {node}.embedding END"
        if embeddings
        else "embedding: null"
    )
    return (
        f"{node} {{.id, .content, .summary, .memory_type, .importance, .access_count, "
        ".decay_factor, .source, .tags, .cluster_id, "
        f"supersedes: coalesce({node}.supersedes, ''), "
        f"superseded_by: coalesce({node}.superseded_by, ''), "
        f"superseded_at: {micros(node + '.superseded_at')}, "
        f"origin: coalesce({node}.origin, ''), principal: coalesce({node}.principal, ''), "
        f"created_at: {micros(node + '.created_at')}, "
        f"last_accessed_at: {micros(node + '.last_accessed_at')}, "
        f"{embedding}}}"
    )


ENGRAM_VECTOR_INDEX = "smriti_engram_embedding"
CUE_VECTOR_INDEX = "smriti_cue_embedding"
ENGRAM_TEXT_INDEX = "smriti_engram_text"

SCHEMA = (
    "CREATE CONSTRAINT smriti_engram_id IF NOT EXISTS "
    "FOR (e:Engram) REQUIRE (e.user, e.id) IS UNIQUE",
    "CREATE CONSTRAINT smriti_cue_id IF NOT EXISTS FOR (c:Cue) REQUIRE (c.user, c.id) IS UNIQUE",
    "CREATE CONSTRAINT smriti_cue_key IF NOT EXISTS FOR (c:Cue) REQUIRE (c.user, c.key) IS UNIQUE",
    "CREATE CONSTRAINT smriti_meta_key IF NOT EXISTS "
    "FOR (m:SmritiMeta) REQUIRE (m.user, m.key) IS UNIQUE",
    "CREATE INDEX smriti_engram_user IF NOT EXISTS FOR (e:Engram) ON (e.user)",
    "CREATE INDEX smriti_cue_user IF NOT EXISTS FOR (c:Cue) ON (c.user)",
    # Eventually consistent: a commit does not wait for Lucene to refresh the index,
    # which was the largest part of a store. The backend awaits the refresh
    # (AWAIT_TEXT) before its first text read after its own writes; other processes'
    # writes reach the text channel a moment after they commit. An index created
    # before this option stays as it was (consistent at commit), which is also correct.
    f"CREATE FULLTEXT INDEX {ENGRAM_TEXT_INDEX} IF NOT EXISTS "
    "FOR (e:Engram) ON EACH [e.content, e.summary, e.tags_text] "
    "OPTIONS {indexConfig: {`fulltext.eventually_consistent`: true}}",
    # A CoOccurs edge is found by its key, not by walking the edges of two hub cues
    # (MERGE between two bound hubs read every CoOccurs edge of the smaller one).
    "CREATE CONSTRAINT smriti_cooccurs_pair IF NOT EXISTS FOR ()-[r:CoOccurs]-() "
    "REQUIRE (r.user, r.source, r.target) IS UNIQUE",
    # A cue's most important engrams are the first entries of this index: EncodedBy
    # edges carry their cue's id, rank = -importance and the engram's id, so a hub cue's
    # top N is read in order without touching its other members.
    "CREATE INDEX smriti_encoded_rank IF NOT EXISTS FOR ()-[r:EncodedBy]-() "
    "ON (r.user, r.cue, r.rank, r.eid)",
)
AWAIT_INDEXES = "CALL db.awaitIndexes($seconds)"
AWAIT_TEXT = "CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh()"

# Per-user data migrations, in order; version n is reached by running MIGRATIONS[n-1].
# Each is an auto-commit statement (``IN TRANSACTIONS`` keeps a large store's migration
# out of one huge transaction).
MIGRATIONS = (
    # v1: databases written before cluster ids and the tags text field existed.
    "MATCH (e:Engram {user: $user}) WHERE e.cluster_id IS NULL OR e.tags_text IS NULL "
    "SET e.cluster_id = coalesce(e.cluster_id, -1), "
    "e.tags_text = reduce(s = '', t IN coalesce(e.tags, []) | s + ' ' + t)",
    # v2: the keys of EncodedBy (rank index) and CoOccurs (pair constraint) edges.
    "MATCH (e:Engram {user: $user}) CALL (e) { "
    "MATCH (e)-[x:EncodedBy]->(c:Cue) "
    "SET x.user = e.user, x.cue = c.id, x.rank = -e.importance, x.eid = e.id "
    "} IN TRANSACTIONS OF 1000 ROWS",
    "MATCH (a:Cue {user: $user}) CALL (a) { "
    "MATCH (a)-[x:CoOccurs]->(b:Cue) SET x.user = a.user, x.source = a.id, x.target = b.id "
    "} IN TRANSACTIONS OF 1000 ROWS",
    # v4: the version fields (supersedes, superseded_by; superseded_at stays unset) on
    # engrams written before corrections existed. Reads coalesce them too, so this only
    # makes stored nodes uniform; values already set are kept.
    "MATCH (e:Engram {user: $user}) WHERE e.supersedes IS NULL OR e.superseded_by IS NULL "
    "CALL (e) { SET e.supersedes = coalesce(e.supersedes, ''), "
    "e.superseded_by = coalesce(e.superseded_by, '') } IN TRANSACTIONS OF 1000 ROWS",
    # v5: who said it (origin, principal): '' on engrams stored before, unknown.
    "MATCH (e:Engram {user: $user}) WHERE e.origin IS NULL OR e.principal IS NULL "
    "CALL (e) { SET e.origin = coalesce(e.origin, ''), "
    "e.principal = coalesce(e.principal, '') } IN TRANSACTIONS OF 1000 ROWS",
)

# Vector indexes are found by what they cover, not by name: one made by another tool (or
# the reference server) on :Engram(embedding) blocks ours and is used instead if it fits.
VECTOR_INDEXES = """
SHOW VECTOR INDEXES YIELD name, state, options, labelsOrTypes, properties, entityType
WHERE entityType = 'NODE' AND properties = ['embedding']
  AND any(label IN labelsOrTypes WHERE label IN ['Engram', 'Cue'])
RETURN name, state, options, labelsOrTypes[0] AS label
"""
VECTOR_INDEX_LABELS = {ENGRAM_VECTOR_INDEX: "Engram", CUE_VECTOR_INDEX: "Cue"}
CREATE_VECTOR_INDEX = {
    ENGRAM_VECTOR_INDEX: f"CREATE VECTOR INDEX {ENGRAM_VECTOR_INDEX} IF NOT EXISTS "
    "FOR (e:Engram) ON e.embedding OPTIONS {indexConfig: {"
    "`vector.dimensions`: $dims, `vector.similarity_function`: 'cosine', "
    "`vector.quantization.enabled`: false}}",
    CUE_VECTOR_INDEX: f"CREATE VECTOR INDEX {CUE_VECTOR_INDEX} IF NOT EXISTS "
    "FOR (c:Cue) ON c.embedding OPTIONS {indexConfig: {"
    "`vector.dimensions`: $dims, `vector.similarity_function`: 'cosine', "
    "`vector.quantization.enabled`: false}}",
}
AWAIT_INDEX = "CALL db.awaitIndex($name, $seconds)"

DATABASE_EXISTS = "SHOW DATABASES YIELD name WHERE name = $name RETURN name"
CREATE_DATABASE = "CREATE DATABASE $name IF NOT EXISTS WAIT"

# -- metadata --------------------------------------------------------------------------
GET_META = "MATCH (m:SmritiMeta {user: $user, key: $key}) RETURN m.value AS value"
SET_META = "MERGE (m:SmritiMeta {user: $user, key: $key}) SET m.value = $value"

# -- writes ----------------------------------------------------------------------------
# Lock order. Concurrent writers deadlock when they lock the same nodes in different
# orders, and every edge write locks both of its end nodes. So each write transaction
# first takes exclusive locks on the nodes whose edges or properties it will change,
# in one global order: cues sorted by key, then engrams sorted by id. While a
# transaction holds a node's lock no other one can change that node's edges, so the
# edge writes that follow never wait. ``LOCK`` takes a node lock in plain Cypher (no
# APOC): it sets and removes a property, leaving the node as it was.
LOCK = "SET {0}.smriti_lock = true REMOVE {0}.smriti_lock"

# One memory in one statement. The new engram first (no one else can see it), then its
# cues merged and locked in key order ($cues is sorted), each with its EncodedBy edge
# (the engram is new, so CREATE is exact); then every ordered pair of those cues, found
# by the pair key; then the associated engrams that still exist, locked in id order
# ($targets is sorted), and the AssociatedWith edges to them.
STORE_MEMORY = f"""
CREATE (e:Engram) SET e = $props, {times("e", "$props")}
WITH e
CALL (e) {{
  UNWIND $cues AS c
  MERGE (k:Cue {{user: $user, key: c.key}})
    ON CREATE SET k = c
  {LOCK.format("k")}
  CREATE (e)-[:EncodedBy {{strength: 1.0, created_at: {at("$now")}, user: $user, cue: k.id,
                          rank: -e.importance, eid: e.id}}]->(k)
  RETURN collect(k) AS ks,
         collect([c.key, k {{.id, .name, .cue_type, .embedding_f32,
           embedding: CASE WHEN k.embedding_f32 IS NULL THEN k.embedding END}}]) AS cues
}}
CALL (ks) {{
  UNWIND ks AS a
  UNWIND ks AS b
  WITH a, b WHERE a <> b
  MERGE (a)-[r:CoOccurs {{user: $user, source: a.id, target: b.id}}]->(b)
    ON CREATE SET r.strength = 1.0
    ON MATCH SET r.strength = r.strength + 1.0
  RETURN count(*) AS pairs
}}
CALL (e) {{
  UNWIND $targets AS id
  MATCH (t:Engram {{user: $user, id: id}})
  {LOCK.format("t")}
  RETURN count(*) AS locked
}}
CALL (e) {{
  UNWIND $associations AS a
  MATCH (t:Engram {{user: $user, id: a.target}})
  MERGE (e)-[r:AssociatedWith {{relation_type: a.relation_type}}]->(t)
  SET r.strength = a.strength, r.created_at = {at("a.created_at")}
  RETURN count(*) AS associated
}}
RETURN cues
"""
ENGRAM_CONTENT = "MATCH (e:Engram {user: $user, id: $id}) RETURN e.content AS content"
STORED_CUES = """
MATCH (:Engram {user: $user, id: $id})-[:EncodedBy]->(k:Cue)
RETURN k {.id, .name, .cue_type, .embedding_f32,
  embedding: CASE WHEN k.embedding_f32 IS NULL THEN k.embedding END} AS cue
ORDER BY k.key
"""
MERGE_ASSOCIATIONS = f"""
UNWIND $rows AS a
MATCH (s:Engram {{user: $user, id: a.source}})
MATCH (t:Engram {{user: $user, id: a.target}})
MERGE (s)-[r:AssociatedWith {{relation_type: a.relation_type}}]->(t)
SET r.strength = a.strength, r.created_at = {at("a.created_at")}
"""
# $rows sorted by id, so the engrams are locked in id order. The full-text index covers
# tags_text, so it follows a new tag list in the same transaction.
UPDATE_ENGRAMS = f"""
UNWIND $rows AS r
MATCH (e:Engram {{user: $user, id: r.id}})
SET e.access_count = coalesce(r.access_count, e.access_count),
    e.last_accessed_at = coalesce({at("r.last_accessed_at")}, e.last_accessed_at),
    e.decay_factor = coalesce(r.decay_factor, e.decay_factor),
    e.cluster_id = coalesce(r.cluster_id, e.cluster_id),
    e.importance = coalesce(r.importance, e.importance),
    e.tags = coalesce(r.tags, e.tags),
    e.tags_text = coalesce(r.tags_text, e.tags_text),
    e.superseded_by = coalesce(r.superseded_by, e.superseded_by),
    e.superseded_at = coalesce({at("r.superseded_at")}, e.superseded_at)
WITH e, r WHERE r.importance IS NOT NULL
MATCH (e)-[x:EncodedBy]->()
SET x.rank = -e.importance
"""
# Deleting an engram removes edges at its cues and at its associated engrams: lock
# those first, cues by key, then engrams (these and their neighbours) by id.
LOCK_CUES_OF = f"""
MATCH (e:Engram {{user: $user}})-[:EncodedBy]->(c:Cue)
WHERE e.id IN $ids
WITH DISTINCT c ORDER BY c.key
{LOCK.format("c")}
"""
LOCK_ENGRAMS_AROUND = f"""
MATCH (e:Engram {{user: $user}})
WHERE e.id IN $ids
OPTIONAL MATCH (e)-[:AssociatedWith]-(o:Engram)
WITH collect(e) + collect(o) AS nodes
UNWIND nodes AS n
WITH DISTINCT n ORDER BY n.id
{LOCK.format("n")}
"""
DELETE_ENGRAMS = """
UNWIND $ids AS id
MATCH (e:Engram {user: $user, id: id})
DETACH DELETE e
RETURN count(*) AS deleted
"""
# Orphaned cues and their CoOccurs neighbours, locked in key order; the delete checks
# again, under the locks, that no store has linked one of them meanwhile.
FIND_ORPHAN_CUES = """
MATCH (c:Cue {user: $user})
WHERE NOT EXISTS { (c)<-[:EncodedBy]-(:Engram) }
RETURN c.id AS id LIMIT $batch
"""
LOCK_CUES_AROUND = f"""
MATCH (c:Cue {{user: $user}})
WHERE c.id IN $ids
OPTIONAL MATCH (c)-[:CoOccurs]-(o:Cue)
WITH collect(c) + collect(o) AS nodes
UNWIND nodes AS n
WITH DISTINCT n ORDER BY n.key
{LOCK.format("n")}
"""
DELETE_ORPHANS = """
UNWIND $ids AS id
MATCH (c:Cue {user: $user, id: id})
WHERE NOT EXISTS { (c)<-[:EncodedBy]-(:Engram) }
DETACH DELETE c
RETURN count(*) AS deleted
"""
# A replaced engram's edges keep their keys; their rank follows its new importance.
IMPORT_ENGRAMS = f"""
UNWIND $rows AS p
MERGE (e:Engram {{user: $user, id: p.id}})
SET e = p, {times("e", "p")}
WITH e
MATCH (e)-[x:EncodedBy]->()
SET x.rank = -e.importance
"""
IMPORT_CUES = """
UNWIND $rows AS p
MERGE (c:Cue {user: $user, id: p.id})
SET c = p
"""
IMPORT_LINKS = """
UNWIND $rows AS r
MATCH (e:Engram {user: $user, id: r.engram})
MATCH (c:Cue {user: $user, id: r.cue})
MERGE (e)-[x:EncodedBy]->(c)
SET x.strength = r.strength, x.user = $user, x.cue = c.id, x.rank = -e.importance, x.eid = e.id
"""
IMPORT_COOCCURS = """
UNWIND $rows AS r
MATCH (a:Cue {user: $user, id: r.source})
MATCH (b:Cue {user: $user, id: r.target})
MERGE (a)-[x:CoOccurs {user: $user, source: r.source, target: r.target}]->(b)
SET x.strength = r.strength
"""

# -- reads -----------------------------------------------------------------------------
GET_ENGRAMS = f"""
UNWIND $ids AS id
MATCH (e:Engram {{user: $user, id: id}})
RETURN {engram_map("e")} AS p
"""
#: GET_ENGRAMS without the embeddings (recall's candidate pool).
GET_ENGRAMS_BARE = f"""
UNWIND $ids AS id
MATCH (e:Engram {{user: $user, id: id}})
RETURN {engram_map("e", embeddings=False)} AS p
"""
COUNT_ENGRAMS = "MATCH (e:Engram {user: $user}) RETURN count(e) AS n"
COUNTS = """
RETURN
  COUNT { MATCH (:Engram {user: $user}) } AS engrams,
  COUNT { MATCH (:Cue {user: $user}) } AS cues,
  COUNT { MATCH (:Engram {user: $user})-[:EncodedBy]->(:Cue) } AS links,
  COUNT { MATCH (:Engram {user: $user})-[:AssociatedWith]->(:Engram) } AS associations,
  COUNT { MATCH (:Cue {user: $user})-[:CoOccurs]->(:Cue) } AS cooccurrences
"""
ENGRAM_STATS_PAGE = """
MATCH (e:Engram {user: $user})
WHERE e.id > $after
RETURN e {.id, .importance, .access_count, .decay_factor, .cluster_id,
  last_accessed_at: e.last_accessed_at.epochSeconds * 1000000 + e.last_accessed_at.microsecond} AS p
ORDER BY e.id
LIMIT $batch
"""
ENGRAMS_PAGE = f"""
MATCH (e:Engram {{user: $user}})
WHERE e.id > $after
WITH e ORDER BY e.id LIMIT $batch
RETURN {engram_map("e")} AS p
"""
CUES_PAGE = """
MATCH (c:Cue {user: $user})
WHERE c.id > $after
WITH c ORDER BY c.id LIMIT $batch
RETURN c {.id, .name, .cue_type, .embedding_f32,
  embedding: CASE WHEN c.embedding_f32 IS NULL THEN c.embedding END} AS p
"""
# Edge pages walk their start nodes in id order; ``last`` is where the next page starts.
LINKS_PAGE = """
MATCH (e:Engram {user: $user})
WHERE e.id > $after
WITH e ORDER BY e.id LIMIT $batch
WITH collect(e) AS nodes
UNWIND nodes AS e
OPTIONAL MATCH (e)-[r:EncodedBy]->(c:Cue)
RETURN last(nodes).id AS last, size(nodes) AS seen,
       collect(CASE WHEN c IS NULL THEN NULL ELSE [e.id, c.id, r.strength] END) AS rows
"""
ASSOCIATIONS_PAGE = """
MATCH (e:Engram {user: $user})
WHERE e.id > $after
WITH e ORDER BY e.id LIMIT $batch
WITH collect(e) AS nodes
UNWIND nodes AS e
OPTIONAL MATCH (e)-[r:AssociatedWith]->(t:Engram)
RETURN last(nodes).id AS last, size(nodes) AS seen,
       collect(CASE WHEN t IS NULL THEN NULL
               ELSE [e.id, t.id, r.strength, r.relation_type,
                     r.created_at.epochSeconds * 1000000 + r.created_at.microsecond] END) AS rows
"""
COOCCURS_PAGE = """
MATCH (c:Cue {user: $user})
WHERE c.id > $after
WITH c ORDER BY c.id LIMIT $batch
WITH collect(c) AS nodes
UNWIND nodes AS c
OPTIONAL MATCH (c)-[r:CoOccurs]->(o:Cue)
RETURN last(nodes).id AS last, size(nodes) AS seen,
       collect(CASE WHEN o IS NULL THEN NULL ELSE [c.id, o.id, r.strength] END) AS rows
"""
GET_CUES = """
UNWIND $keys AS key
MATCH (c:Cue {user: $user, key: key})
RETURN c {.id, .name, .cue_type, .embedding_f32,
  embedding: CASE WHEN c.embedding_f32 IS NULL THEN c.embedding END} AS p
"""
GET_CUES_BY_ID = """
UNWIND $ids AS id
MATCH (c:Cue {user: $user, id: id})
RETURN c {.id, .name, .cue_type, .embedding_f32,
  embedding: CASE WHEN c.embedding_f32 IS NULL THEN c.embedding END} AS p
"""
