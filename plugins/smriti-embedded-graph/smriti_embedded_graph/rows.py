"""The statements that write a new memory's rows, and the HNSW index's vector rows.

A new memory is journaled first and written later, in a batch (``writebehind``); these
are its statements inside the batch's transaction: its nodes in one ``CREATE``, its
EncodedBy edges by primary key or by one join (``link_by_key``), its AssociatedWith
edges, and its vector in the index table when Kùzu's HNSW index is built (only without
a working set; DESIGN.md).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from smriti.backend import Association, batched, utcnow
from smriti_embedded_graph.codec import ENGRAM_CREATE_ONE, ts_in, vec_literal, vec_out
from smriti_embedded_graph.cuemap import CueMap
from smriti_embedded_graph.store import GraphStore
from smriti_embedded_graph.writebehind import MemoryWrite

#: Vector rows per statement.
VECTOR_BATCH = 2000

_ASSOC = (
    "UNWIND $rows AS r MATCH (a:Engram {id: r.a}), (b:Engram {id: r.b}) "
    "MERGE (a)-[x:AssociatedWith]->(b) ON CREATE SET x.strength = r.s, "
    "x.relation_type = r.t, x.created_at = r.ts ON MATCH SET x.strength = r.s, "
    "x.relation_type = r.t"
)
#: EncodedBy edges from ``$e`` to the cues ``$cs``. ``UNWIND ... MATCH`` by id is a hash
#: join that scans the whole Cue table: in Kùzu 0.11.3 about 1 ms plus 0.12 ms per
#: 1,000 cues (1.7 ms at 5,700 cues, 25 ms at 205,000). ``_link_statement`` looks each
#: cue up by primary key instead, about 0.45 ms a cue whatever the table's size;
#: ``link_by_key`` picks the cheaper of the two.
_LINK = (
    "MATCH (e:Engram {id: $e}) UNWIND $cs AS cid MATCH (c:Cue {id: cid}) "
    "CREATE (e)-[:EncodedBy {strength: 1.0, created_at: $ts}]->(c)"
)


def link_by_key(links: int, cues: int) -> bool:
    """Whether ``links`` primary-key lookups beat one join over a ``cues``-row table."""
    return 0.45 * links < 1.0 + 0.12 * cues / 1000


@lru_cache(maxsize=64)
def _link_statement(n: int) -> str:
    """EncodedBy edges from ``$e`` to the cues ``$c0..``, each matched by primary key (all
    known to exist)."""
    match = ", ".join(["(e:Engram {id: $e})", *(f"(c{i}:Cue {{id: $c{i}}})" for i in range(n))])
    edges = ", ".join(
        f"(e)-[:EncodedBy {{strength: 1.0, created_at: $ts}}]->(c{i})" for i in range(n)
    )
    return f"MATCH {match} CREATE {edges}"


@lru_cache(maxsize=128)
def _assoc_statement(n: int) -> str:
    """AssociatedWith edges from ``$a`` to ``$b0..`` (all known to exist)."""
    match = ", ".join(["(a:Engram {id: $a})", *(f"(b{i}:Engram {{id: $b{i}}})" for i in range(n))])
    edges = ", ".join(
        f"(a)-[:AssociatedWith {{strength: $s{i}, relation_type: $t{i}, created_at: $ts{i}}}]->"
        f"(b{i})"
        for i in range(n)
    )
    return f"MATCH {match} CREATE {edges}"


@lru_cache(maxsize=8)
def _memory_nodes(cues: bool, pending: bool) -> str:
    """One statement creating a new memory's nodes: the engram, its CoOccursQueue row
    (``$pending``) if any, and its new cues (``$rows``) if any."""
    nodes = [ENGRAM_CREATE_ONE.removeprefix("CREATE ")]
    if pending:
        nodes.append("(:CoOccursQueue {id: $id, cues: $pending})")
    statement = "CREATE " + ", ".join(nodes)
    return statement + " WITH 1 AS one UNWIND $rows AS r " + CUE_CREATE_ROW if cues else statement


CUE_CREATE_ROW = (
    "CREATE (:Cue {id: r.id, name: r.name, cue_type: r.cue_type, embedding: r.embedding})"
)


def assoc_row(a: Association, undated: datetime | None = None) -> dict[str, Any]:
    """Parameters of one AssociatedWith edge; ``undated`` (default: now) stands in for
    no time."""
    return {
        "a": a.source_id,
        "b": a.target_id,
        "s": float(a.strength),
        "t": a.relation_type,
        "ts": ts_in(a.created_at or undated or utcnow()),
    }


class RowWriter:
    """The rows of new memories and of the vector index, through ``store``; ``cues``
    tells which cues and engrams exist."""

    def __init__(self, store: GraphStore, cues: CueMap) -> None:
        self._store = store
        self._cues = cues

    def write_memory(self, conn: Any, memory: MemoryWrite) -> None:
        """The statements of one new memory, in the caller's transaction."""
        # The new nodes (engram, new cues, the CoOccursQueue row) in one CREATE: 0.9 ms
        # less per store at 100k than three statements (measured with the cues as
        # per-cue parameters; UNWIND keeps 4 shapes). Links and associations stay
        # separate: one statement with their MATCHes measured slower (add_memory p50
        # 6.9-9.8 ms against 5.7-6.1 ms).
        row, ids = memory.row, memory.cue_ids
        key, ts = row["id"], row["created_at"]
        params = dict(row)
        if memory.pending:
            params["pending"] = ids
        if memory.new_cues:
            params["rows"] = memory.new_cues
        self._store.exec(conn, _memory_nodes(bool(memory.new_cues), memory.pending), params)
        if ids and link_by_key(len(ids), len(self._cues.by_id) + len(memory.new_cues)):
            keys = {f"c{i}": cid for i, cid in enumerate(ids)}
            self._store.exec(conn, _link_statement(len(ids)), {"e": key, "ts": ts, **keys})
        elif ids:
            self._store.exec(conn, _LINK, {"e": key, "cs": ids, "ts": ts})
        if memory.assoc:
            self._add_associations(conn, key, memory.assoc)
        vector = vec_out(row["embedding"]) if self._store.vector_index_dims else None
        if vector is not None and self._store.vector_index_dims == vector.shape[0]:
            self.index_vectors(conn, [(key, vector)])

    def _add_associations(self, conn: Any, source: str, rows: list[dict[str, Any]]) -> None:
        """AssociatedWith edges of a new engram to existing targets (missing ones skipped)."""
        known = self._cues.engram_ids  # None while the journal is replayed at open
        if known is not None and all(r["a"] == source for r in rows):
            # A new engram has no edges yet, so CREATE (not MERGE), by scalar primary
            # keys; the last row per target wins; unknown targets no longer exist.
            targets = {r["b"]: r for r in rows if r["b"] in known or r["b"] == source}
            if targets:
                params: dict[str, Any] = {"a": source}
                for i, r in enumerate(targets.values()):
                    params.update(
                        {f"b{i}": r["b"], f"s{i}": r["s"], f"t{i}": r["t"], f"ts{i}": r["ts"]}
                    )
                self._store.exec(conn, _assoc_statement(len(targets)), params)
        elif rows:
            self._store.exec(conn, _ASSOC, {"rows": rows})

    def index_vectors(self, conn: Any, vectors: list[tuple[str, np.ndarray]]) -> None:
        """Rows of the HNSW index's vector table (when it is built), in ``conn``'s transaction."""
        if not vectors or not self._store.vector_index_dims:
            return
        dims = self._store.vector_index_dims
        for batch in batched(vectors, VECTOR_BATCH):
            self._store.exec(
                conn,
                "UNWIND $rows AS r CREATE (:EngramVec "
                f"{{id: r.id, vec: CAST(r.v AS FLOAT[{dims}])}})",
                {"rows": [{"id": k, "v": vec_literal(v)} for k, v in batch]},
            )

    def unindex_vectors(self, conn: Any, ids: list[str]) -> None:
        """Drop the vector table's rows of ``ids`` (when the index is built)."""
        if ids and self._store.vector_index_dims:
            self._store.exec(
                conn, "UNWIND $ids AS i MATCH (v:EngramVec {id: i}) DELETE v", {"ids": ids}
            )
