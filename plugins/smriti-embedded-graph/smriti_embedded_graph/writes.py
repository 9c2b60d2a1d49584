"""Write half of the Kùzu backend: add_memory, updates, deletes, import and indexes.

Every write converts and validates its input first, then runs in one transaction, and
updates what the backend keeps in memory (the cues, the engram ids) only after the
commit, so a failure leaves neither half-changed. A new memory is the exception: it is
journaled, then kept, then written by a background thread (``writebehind``).
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti import get_logger
from smriti.backend import (
    Association,
    BackendError,
    CoOccurrence,
    Cue,
    Engram,
    EngramUpdate,
    Link,
    StoredMemory,
    as_vector,
    batched,
    normalise_cue_name,
    utcnow,
)
from smriti_embedded_graph.codec import (
    ENGRAM_CREATE,
    ENGRAM_CREATE_ONE,
    ENGRAM_SET,
    cue_params,
    engram_params,
    row_value,
    ts_in,
    vec_literal,
    vec_out,
)
from smriti_embedded_graph.writebehind import MemoryWrite

if TYPE_CHECKING:
    from smriti_embedded_graph.backend import EmbeddedGraphBackend as _Self
else:
    _Self = object

log = get_logger(__name__)

BATCH = 2000
#: Up to this many updates of the same fields go one by one through the primary key.
SMALL_UPDATE = 32
FTS_INDEX = "engram_fts"
VECTOR_INDEX = "engram_vec"

_ASSOC = (
    "UNWIND $rows AS r MATCH (a:Engram {id: r.a}), (b:Engram {id: r.b}) "
    "MERGE (a)-[x:AssociatedWith]->(b) ON CREATE SET x.strength = r.s, "
    "x.relation_type = r.t, x.created_at = r.ts ON MATCH SET x.strength = r.s, "
    "x.relation_type = r.t"
)
#: Endpoint tables and the SET of existing edges, per edge table, for import.
_EDGE_ENDS = {
    "EncodedBy": ("Engram", "e", "Cue", "c"),
    "AssociatedWith": ("Engram", "a", "Engram", "b"),
    "CoOccurs": ("Cue", "a", "Cue", "b"),
}
_EDGE_SET = {
    "EncodedBy": "x.strength = r.s",
    "AssociatedWith": "x.strength = r.s, x.relation_type = r.t",
    "CoOccurs": "x.strength = r.s",
}


def _update_edges(table: str) -> str:
    """UNWIND statement updating the properties of existing ``table`` edges."""
    src, a, dst, b = _EDGE_ENDS[table]
    return (
        f"UNWIND $rows AS r MATCH (p:{src} {{id: r.{a}}})-[x:{table}]->(q:{dst} {{id: r.{b}}}) "
        f"SET {_EDGE_SET[table]}"
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


@lru_cache(maxsize=256)
def _update_statement(fields: tuple[str, ...], n: int) -> str:
    """SET ``fields`` of engrams ``$id0..``, each matched by primary key, in one statement."""
    match = ", ".join(f"(e{i}:Engram {{id: $id{i}}})" for i in range(n))
    sets = ", ".join(f"e{i}.{f} = ${f}{i}" for i in range(n) for f in fields)
    return f"MATCH {match} SET {sets}"


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
    return statement + " WITH 1 AS one UNWIND $rows AS r " + _CUE_CREATE_ROW if cues else statement


_CUE_CREATE_ROW = (
    "CREATE (:Cue {id: r.id, name: r.name, cue_type: r.cue_type, embedding: r.embedding})"
)
_CUE_SET = "e.name = r.name, e.cue_type = r.cue_type, e.embedding = r.embedding"
_UPDATABLE = (
    "access_count",
    "last_accessed_at",
    "decay_factor",
    "cluster_id",
    "importance",
    "tags",
    "superseded_by",
    "superseded_at",
)
#: Kùzu types of the fields a staged (COPY + join) update can carry.
_STAGED_TYPES = {
    "access_count": "INT64",
    "decay_factor": "DOUBLE",
    "cluster_id": "INT64",
    "importance": "DOUBLE",
}
#: Groups at least this large are staged: rows into a scratch table, then one join.
#: Per-row ``SET`` through UNWIND costs ~0.5 ms a row in Kùzu 0.11.3 (60k rows: 29 s);
#: the staged update of the same rows took 0.5 s.
STAGED_UPDATE = 1000
#: Updates are written this many at a time, each batch in a transaction of its own: Kùzu
#: keeps a transaction's changes in memory until it commits, and a consolidation of a
#: large store updates most of its memories (a join per batch is a few milliseconds).
STAGED_BATCH = 10_000
#: Replaces ``EngramUpdateStage`` (keyed by engram id, so keys were reused).
STAGING_TABLE = "EngramUpdateRows"
STAGE_ROWS_BATCH = 5000
_STAGE_ROWS = (
    f"UNWIND $rows AS r CREATE (:{STAGING_TABLE} {{key: r.key, id: r.id, "
    + ", ".join(f"{f}: CAST(r.{f} AS {t})" for f, t in _STAGED_TYPES.items())
    + "})"
)


class WritesMixin(_Self):  # type: ignore[misc,valid-type]
    """add_memory, update/delete, import_records, ensure_indexes and meta writes."""

    # -- cue bookkeeping --------------------------------------------------------------
    def remember_cues(self, cues: Iterable[Cue]) -> None:
        """Add committed cues to the name map and their vectors to the cue cache."""
        with self._cues_lock:
            rows = []
            for cue in cues:
                key = normalise_cue_name(cue.name)
                old = self.cues_by_key.get(key)
                if old is not None and old.id != cue.id:
                    self.cue_cache.remove([old.id])
                    self.cues_by_id.pop(old.id, None)
                replaced = self.cues_by_id.get(cue.id)
                if replaced is not None and normalise_cue_name(replaced.name) != key:
                    self.cues_by_key.pop(normalise_cue_name(replaced.name), None)
                bare = Cue(cue.id, cue.name, cue.cue_type)
                self.cues_by_key[key] = bare
                self.cues_by_id[cue.id] = bare
                if cue.embedding is not None:
                    rows.append((cue.id, cue.embedding, 0))
                else:
                    self.cue_cache.remove([cue.id])
            self.cue_cache.put_many(rows)

    def forget_cues(self, ids: set[str]) -> None:
        """Drop deleted cues from the name map and the cue cache."""
        with self._cues_lock:
            for cid in ids:
                cue = self.cues_by_id.pop(cid, None)
                if cue is not None:
                    key = normalise_cue_name(cue.name)
                    if self.cues_by_key.get(key) is cue:
                        del self.cues_by_key[key]
            self.cue_cache.remove(ids)

    def stored_cue(self, cue: Cue) -> Cue:
        """A cue of the name map with its embedding."""
        return Cue(cue.id, cue.name, cue.cue_type, self.cue_cache.vector(cue.id))

    def check_dims(self, vector: np.ndarray) -> None:
        """Raise BackendError when ``vector`` does not match the stored embeddings' width."""
        if self.dims is not None and vector.shape[0] != self.dims:
            raise BackendError(
                f"embedding has {vector.shape[0]} dimensions but this store holds "
                f"{self.dims}-dimensional vectors; re-embed or use a new STORAGE_LOCATION"
            )

    def _resolve_cues(self, cues: Sequence[Cue]) -> tuple[list[Cue], list[Cue]]:
        """(cues as stored for this memory, the new ones to create), merged by name."""
        stored: dict[str, Cue] = {}
        new: list[Cue] = []
        for cue in cues:
            key = normalise_cue_name(cue.name)
            if key in stored:
                continue
            existing = self.cues_by_key.get(key)
            if existing is None:
                emb = None if cue.embedding is None else as_vector(cue.embedding)
                if emb is not None:
                    self.cue_cache.check_dims(emb)
                existing = Cue(cue.id, cue.name, cue.cue_type, emb)
                new.append(existing)
            else:
                existing = self.stored_cue(existing)
            stored[key] = existing
        return list(stored.values()), new

    # -- add_memory ---------------------------------------------------------------------
    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Store one memory atomically (see StorageBackend.add_memory)."""
        edges = list(associations)
        return self._add_memory(engram, cues, lambda: (edges, engram.cluster_id))

    def worker(self) -> ThreadPoolExecutor:
        """A thread for work that overlaps a write: an import's commit, its CSV."""
        with self._worker_lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="smriti-kuzu")
            return self._worker

    def _add_memory(
        self,
        engram: Engram,
        cues: Sequence[Cue],
        found: Callable[[], tuple[Sequence[Association], int]],
    ) -> StoredMemory:
        """Store ``engram`` and ``cues`` with the edges and cluster ``found()`` returns:
        journaled, then written to Kùzu in the background (``writebehind``)."""
        vector = None if engram.embedding is None else as_vector(engram.embedding)
        if vector is not None:
            self.check_dims(vector)
        with self._write_lock:
            retried = self._retried(engram)
            if retried is not None:
                return retried
            stored_cues, new_cues = self._resolve_cues(cues)
            self._check_new_ids(engram.id, new_cues)
            edges, cluster = found()
            if cluster != engram.cluster_id:
                engram = replace(engram, cluster_id=int(cluster))
            memory = MemoryWrite(
                row=engram_params(engram),
                new_cues=[cue_params(c) for c in new_cues],
                cue_ids=[c.id for c in stored_cues],
                assoc=[self._assoc_row(a) for a in edges],
            )
            memory.line = memory.to_line()
            self._check_store_room(len(memory.line))
            self._enqueue(memory)
            self.remember_cues(new_cues)
            if self._engram_ids is not None:
                self._engram_ids.add(engram.id)
            if vector is not None and self.dims is None:
                self.dims = int(vector.shape[0])
        return StoredMemory(engram=engram, cues=stored_cues, associations=len(edges))

    def _retried(self, engram: Engram) -> StoredMemory | None:
        """The memory already stored under ``engram.id`` when this is a retry of it (the
        same content: nothing changes); None when the id is new. Other content under
        the id is refused by ``_check_new_ids``."""
        ids = self._engram_ids
        if ids is None or engram.id not in ids:
            return None
        found = self.get_engrams([engram.id])
        if not found or found[0].content != engram.content:
            return None
        links = self.cues_of([engram.id])
        by_id = self.cues_by_id
        cues = [self.stored_cue(by_id[lk.cue_id]) for lk in links if lk.cue_id in by_id]
        return StoredMemory(engram=found[0], cues=cues, associations=0)

    def _check_new_ids(self, engram_id: str, new_cues: Sequence[Cue]) -> None:
        """Refuse what Kùzu would refuse in the background write: ids already taken."""
        ids = self._engram_ids
        if ids is not None and engram_id in ids:
            raise BackendError(f"an engram with id {engram_id!r} is already stored")
        seen: set[str] = set()
        for cue in new_cues:
            if cue.id in self.cues_by_id or cue.id in seen:
                raise BackendError(f"a cue with id {cue.id!r} is already stored")
            seen.add(cue.id)

    def _write_memory(self, conn: Any, memory: MemoryWrite) -> None:
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
        self._exec(conn, _memory_nodes(bool(memory.new_cues), memory.pending), params)
        if ids and link_by_key(len(ids), len(self.cues_by_id) + len(memory.new_cues)):
            keys = {f"c{i}": cid for i, cid in enumerate(ids)}
            self._exec(conn, _link_statement(len(ids)), {"e": key, "ts": ts, **keys})
        elif ids:
            self._exec(conn, _LINK, {"e": key, "cs": ids, "ts": ts})
        if memory.assoc:
            self._add_associations(conn, key, memory.assoc)
        vector = vec_out(row["embedding"]) if self.vector_index_dims else None
        if vector is not None and self.vector_index_dims == vector.shape[0]:
            self._index_vectors(conn, [(key, vector)])

    def _add_associations(self, conn: Any, source: str, rows: list[dict[str, Any]]) -> None:
        """AssociatedWith edges of a new engram to existing targets (missing ones skipped)."""
        known = self._engram_ids  # None while the journal is replayed at open
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
                self._exec(conn, _assoc_statement(len(targets)), params)
        elif rows:
            self._exec(conn, _ASSOC, {"rows": rows})

    @staticmethod
    def _assoc_row(a: Association, undated: datetime | None = None) -> dict[str, Any]:
        """Parameters of one edge; ``undated`` (default: now) stands in for no time."""
        return {
            "a": a.source_id,
            "b": a.target_id,
            "s": float(a.strength),
            "t": a.relation_type,
            "ts": ts_in(a.created_at or undated or utcnow()),
        }

    # -- updates and deletes ------------------------------------------------------------
    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply partial updates: updates changing the same fields share one statement.

        Small groups (recall strengthens a handful) go in one statement matching each
        engram by primary key; groups of ``STAGED_UPDATE`` or more (consolidation) are
        staged (COPY into a scratch table, one join); sizes in between use ``UNWIND``.
        """
        self._ensure_staging()
        for batch in batched(updates, STAGED_BATCH):
            groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for u in batch:
                row = _update_row(u)
                if len(row) > 1:
                    groups.setdefault(tuple(k for k in row if k != "id"), []).append(row)
            if not groups:
                continue
            _merge_staged(groups)
            with self._write_lock, self._errors(), self._write() as conn:
                for fields, rows in groups.items():
                    sets = ", ".join(f"e.{f} = {row_value(f)}" for f in fields)
                    ids = self._engram_ids
                    if len(rows) <= SMALL_UPDATE and ids is not None:
                        # One MATCH of several ids: only ids known to exist, or
                        # one unknown id would void the whole statement.
                        known = [r for r in rows if r["id"] in ids]
                        params = {f"{k}{i}": v for i, r in enumerate(known) for k, v in r.items()}
                        if known:
                            self._exec(conn, _update_statement(fields, len(known)), params)
                    elif len(rows) <= SMALL_UPDATE:
                        one = ", ".join(f"e.{f} = ${f}" for f in fields)
                        for r in rows:
                            self._exec(conn, f"MATCH (e:Engram {{id: $id}}) SET {one}", r)
                    elif len(rows) >= STAGED_UPDATE and set(fields) <= set(_STAGED_TYPES):
                        self._staged_update(conn, fields, rows)
                    else:
                        self._exec(
                            conn,
                            f"UNWIND $rows AS r MATCH (e:Engram {{id: r.id}}) SET {sets}",
                            {"rows": rows},
                        )

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams with their edges; returns how many existed."""
        unique = list(dict.fromkeys(ids))
        deleted: list[str] = []
        with self._write_lock:
            self._lower_manifest(len(unique))
            for batch in batched(unique, BATCH):
                with self._errors(), self._write() as conn:
                    found = list(self._existing(conn, "Engram", set(), batch))
                    if found:
                        self._journal_forgotten(found)  # before Kùzu may hold the delete
                        self._exec(
                            conn,
                            "UNWIND $ids AS i MATCH (e:Engram {id: i}) DETACH DELETE e",
                            {"ids": found},
                        )
                        self._unindex_vectors(conn, found)
                deleted.extend(found)
                if self._engram_ids is not None:
                    self._engram_ids.difference_update(found)
        return len(deleted)

    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy, with their CoOccurs edges."""
        self.fold_cooccurrences()
        with self._write_lock, self._errors(), self._write() as conn:
            rows = self._exec(
                conn,
                "MATCH (c:Cue) WHERE NOT EXISTS { MATCH (:Engram)-[:EncodedBy]->(c) } RETURN c.id",
            ).get_all()
            ids = [r[0] for r in rows]
            if ids:
                self._exec(
                    conn, "UNWIND $ids AS i MATCH (c:Cue {id: i}) DETACH DELETE c", {"ids": ids}
                )
        self.forget_cues(set(ids))
        return len(ids)

    # -- import -------------------------------------------------------------------------
    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records with their ids, in one transaction; existing ids replaced."""
        self.fold_cooccurrences()  # imported strengths replace, never add to, pending ones
        erows = [engram_params(e) for e in engrams]
        vectors = [(e.id, as_vector(e.embedding)) for e in engrams if e.embedding is not None]
        widths = {v.shape[0] for _, v in vectors} | ({self.dims} if self.dims else set())
        if len(widths) > 1:
            raise BackendError(
                f"embeddings of {sorted(widths)} dimensions: a store holds vectors of one "
                "width; re-embed or use a new STORAGE_LOCATION"
            )
        crows = [cue_params(c) for c in cues]
        now_at = utcnow()
        now = ts_in(now_at)
        lrows = [
            {"e": x.engram_id, "c": x.cue_id, "s": float(x.strength), "ts": now} for x in links
        ]
        arows = [self._assoc_row(a, now_at) for a in associations]
        orows = [
            {"a": c.source_id, "b": c.target_id, "s": float(c.strength)} for c in cooccurrences
        ]

        # The links' CSV is made on the worker while Kùzu creates the engrams (it
        # releases the GIL); used when every link is new, as when restoring.
        link_columns = ("e", "c", "s", "ts")
        link_text = self.worker().submit(csv_text, lrows, link_columns) if lrows else None
        with self._write_lock:
            with self._errors(), self._write() as conn:
                fresh_e: set[str] = set()
                for batch in batched(erows, BATCH):
                    fresh_e |= self._upsert(conn, "Engram", batch, ENGRAM_CREATE, ENGRAM_SET)
                fresh_c: set[str] = set()
                for batch in batched(crows, BATCH):
                    fresh_c |= self._upsert(conn, "Cue", batch, _CUE_CREATE_ROW, _CUE_SET)
                e_ids = {r["id"] for r in erows}
                c_ids = {r["id"] for r in crows}
                e_ok = self._existing(
                    conn,
                    "Engram",
                    e_ids,
                    [r["e"] for r in lrows] + [r["a"] for r in arows] + [r["b"] for r in arows],
                )
                c_ok = self._existing(conn, "Cue", c_ids,
                                      [r["c"] for r in lrows] + [r["a"] for r in orows]
                                      + [r["b"] for r in orows])  # fmt: skip
                plan = (
                    ("EncodedBy", lrows, ("e", "c"), ("s", "ts"),
                     lambda r: r["e"] in fresh_e, lambda r: r["e"] in e_ok and r["c"] in c_ok),
                    ("AssociatedWith", arows, ("a", "b"), ("s", "t", "ts"),
                     lambda r: r["a"] in fresh_e or r["b"] in fresh_e,
                     lambda r: r["a"] in e_ok and r["b"] in e_ok),
                    ("CoOccurs", orows, ("a", "b"), ("s",),
                     lambda r: r["a"] in fresh_c or r["b"] in fresh_c,
                     lambda r: r["a"] in c_ok and r["b"] in c_ok),
                )  # fmt: skip
                copies = []
                for table, rows, ends, props, is_new, valid in plan:
                    # The last row for an edge wins, as with MERGE ... SET.
                    unique = list({(r[ends[0]], r[ends[1]]): r for r in rows if valid(r)}.values())
                    maybe = [r for r in unique if not is_new(r)]
                    # UNWIND ... MERGE of edges silently dropped a few edges of large
                    # batches in Kùzu 0.11.3; existing edges are found first and updated,
                    # every other edge is created by COPY.
                    old = self._existing_edges(conn, table, {r[ends[0]] for r in maybe})
                    rest = [r for r in maybe if (r[ends[0]], r[ends[1]]) in old]
                    copy = [r for r in unique if (r[ends[0]], r[ends[1]]) not in old]
                    copies.append((table, copy, ends + props))
                    for batch in batched(rest, BATCH):
                        self._exec(conn, _update_edges(table), {"rows": batch})
                if self.vector_index_dims:
                    self._unindex_vectors(conn, [key for key, _ in vectors])
                    dims = self.vector_index_dims
                    self._index_vectors(conn, [(k, v) for k, v in vectors if v.shape[0] == dims])
                # The COPYs come last: rolling back a transaction that COPYed into a rel table
                # loses that table's earlier edges in Kùzu 0.11.3 (README, "Known defects"),
                # so nothing that could fail for other reasons runs after them.
                for table, copy, columns in copies:
                    # ``copy`` keeps the order of ``rows``: as long as lrows, it is lrows.
                    whole = link_text is not None and len(copy) == len(lrows)
                    text = link_text.result() if table == "EncodedBy" and whole else None
                    self._copy_rel(conn, table, copy, columns, text)
            try:  # after the commit, under the write lock (a store merges on cue names)
                self._after_import(engrams, cues, widths)
            except BaseException:
                self._reload_caches()
                raise

    def _existing(self, conn: Any, table: str, known: set[str], ids: list[str]) -> set[str]:
        """``known`` plus those of ``ids`` that exist in ``table`` (from the ids kept in
        memory: an ``UNWIND`` join scans the whole table)."""
        unknown = set(ids) - known
        if table == "Engram" and self._engram_ids is not None:
            return known | (unknown & self._engram_ids)
        if table == "Cue":
            return known | {i for i in unknown if i in self.cues_by_id}
        if not unknown:
            return known
        rows = self._exec(
            conn,
            f"UNWIND $ids AS i MATCH (x:{table} {{id: i}}) RETURN x.id",
            {"ids": list(unknown)},
        ).get_all()
        return known | {r[0] for r in rows}

    def _ensure_staging(self) -> None:
        """Create the scratch table of staged updates once per open store (DDL commits)."""
        if self._staging_ready:
            return
        columns = ", ".join(f"{f} {t}" for f, t in _STAGED_TYPES.items())
        with self._exclusive(), self._errors():
            conn = self._conn()
            with self._quiet.exclusive():  # DDL commits: see KuzuBackend._quiet
                conn.execute(
                    f"CREATE NODE TABLE IF NOT EXISTS {STAGING_TABLE}"
                    f"(key STRING, id STRING, {columns}, PRIMARY KEY(key))"
                )
        self._staging_ready = True

    def _staged_update(
        self, conn: Any, fields: tuple[str, ...], rows: list[dict[str, Any]]
    ) -> None:
        """Update many engrams at once: stage the new values, join, clear the stage.

        A row without one of ``fields`` leaves it unchanged (its stage cell is null).
        The stage is filled by UNWIND, not COPY, under keys never used before: a node
        COPY whose rows the same transaction deletes left a write-ahead log that
        crashed Kùzu 0.11.3 when replayed after a kill (``bench/kill_stress.py``)."""
        token = uuid.uuid4().hex
        unique = {r["id"]: r for r in rows}.values()
        staged = [
            {"key": f"{token}:{i}", "id": r["id"], **{f: r.get(f) for f in _STAGED_TYPES}}
            for i, r in enumerate(unique)
        ]
        for batch in batched(staged, STAGE_ROWS_BATCH):
            self._exec(conn, _STAGE_ROWS, {"rows": batch})
        sets = ", ".join(f"e.{f} = coalesce(s.{f}, e.{f})" for f in fields)
        self._exec(conn, f"MATCH (e:Engram), (s:{STAGING_TABLE}) WHERE e.id = s.id SET {sets}")
        self._exec(conn, f"MATCH (s:{STAGING_TABLE}) DELETE s")

    def _existing_edges(self, conn: Any, table: str, sources: set[str]) -> set[tuple[str, str]]:
        """(source id, target id) of the ``table`` edges leaving ``sources``."""
        if not sources:
            return set()
        src, _, dst, _ = _EDGE_ENDS[table]
        # An empty table (the edges of a restore come after its nodes) needs no search.
        empty = f"MATCH (a:{src})-[:{table}]->(b:{dst}) RETURN 1 LIMIT 1"
        if not self._exec(conn, empty).get_all():
            return set()
        found: set[tuple[str, str]] = set()
        for batch in batched(sorted(sources), BATCH):
            rows = self._exec(
                conn,
                f"MATCH (a:{src})-[:{table}]->(b:{dst}) WHERE a.id IN $ids RETURN a.id, b.id",
                {"ids": batch},
            ).get_all()
            found.update((r[0], r[1]) for r in rows)
        return found

    def _copy_rel(
        self,
        conn: Any,
        table: str,
        rows: list[dict[str, Any]],
        cols: tuple,
        text: str | None = None,
    ) -> None:
        """Bulk-insert new edges with COPY from a temporary CSV file.

        Only for edges known not to exist yet and whose endpoints both exist:
        ``UNWIND ... MATCH`` by id is a hash join over the whole table in Kùzu 0.11, COPY
        is 100x faster (README).
        """
        self._copy_rows(conn, table, rows, cols, text)

    def _copy_rows(
        self,
        conn: Any,
        table: str,
        rows: Sequence[dict[str, Any]],
        columns: Sequence[str],
        text: str | None = None,
    ) -> None:
        """COPY ``rows`` into ``table`` through a temporary CSV file (a missing or None
        value is an empty cell); ``text`` is their ``csv_text`` when already made."""
        if not rows:
            return
        with tempfile.TemporaryDirectory(prefix="smriti-kuzu-") as tmp:
            path = os.path.join(tmp, f"{table}.csv")
            with open(path, "w", newline="", encoding="utf-8") as f:
                f.write(csv_text(rows, columns) if text is None else text)
            self._exec(conn, f"COPY {table} FROM '{quote_path(path)}' (HEADER=false)")

    def _upsert(
        self, conn: Any, table: str, rows: list[dict[str, Any]], create: str, update: str
    ) -> set[str]:
        """Create new rows, update existing ones; returns the ids created."""
        existing = self._existing(conn, table, set(), [r["id"] for r in rows])
        fresh = [r for r in rows if r["id"] not in existing]
        if fresh:
            self._exec(conn, f"UNWIND $rows AS r {create}", {"rows": fresh})
        if existing:
            replaced = [r for r in rows if r["id"] in existing]
            self._exec(
                conn,
                f"UNWIND $rows AS r MATCH (e:{table} {{id: r.id}}) SET {update}",
                {"rows": replaced},
            )
        return {r["id"] for r in fresh}

    def _after_import(
        self, engrams: Sequence[Engram], cues: Sequence[Cue], widths: set[int]
    ) -> None:
        """Keep the imported cues and engram ids (after the commit)."""
        self.forget_cues({c.id for c in cues})
        self.remember_cues(cues)
        if self._engram_ids is not None:
            self._engram_ids.update(e.id for e in engrams)
        if widths and self.dims is None:
            self.dims = next(iter(widths))

    # -- vector index table (only without a working set; see DESIGN.md) -------------------
    def _index_vectors(self, conn: Any, vectors: list[tuple[str, np.ndarray]]) -> None:
        if not vectors or not self.vector_index_dims:
            return
        dims = self.vector_index_dims
        for batch in batched(vectors, BATCH):
            self._exec(
                conn,
                "UNWIND $rows AS r CREATE (:EngramVec "
                f"{{id: r.id, vec: CAST(r.v AS FLOAT[{dims}])}})",
                {"rows": [{"id": k, "v": vec_literal(v)} for k, v in batch]},
            )

    def _drop_unused_text_index(self) -> None:
        """Drop an FTS index left by a session without a working set: the working set
        serves text search now, and the index would slow every write and delete (it is
        rebuilt by a session without one)."""
        if self.native_indexes or FTS_INDEX not in self.index_names():
            return
        with self._exclusive(), self._errors():
            conn = self._conn()
            with self._quiet.exclusive():  # DDL and checkpoint: see KuzuBackend._quiet
                conn.execute(f"CALL DROP_FTS_INDEX('Engram', '{FTS_INDEX}')")
                conn.execute("CHECKPOINT")
        self._schema_epoch += 1
        log.info("kuzu text index dropped: the working set serves text search", path=str(self.path))

    def _unindex_vectors(self, conn: Any, ids: list[str]) -> None:
        if ids and self.vector_index_dims:
            self._exec(conn, "UNWIND $ids AS i MATCH (v:EngramVec {id: i}) DELETE v", {"ids": ids})

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Above ``min_engrams``, when no working set answers recall (``native_indexes``):
        the full-text and HNSW indexes.

        With a working set, neither is built: an HNSW index costs 17 ms on every insert
        (43 s to build at 10k), the FTS index ~0.3 ms on every store and made deleting
        engrams 50x slower (5,000 at 100k: 4.8 s instead of 0.09 s; DESIGN.md).
        """
        if not self.native_indexes or self.count_engrams() <= min_engrams:
            return []
        created: list[str] = []
        with self._exclusive(), self._errors():
            existing = self.index_names()
            if FTS_INDEX not in existing:
                conn = self._conn()
                with self._quiet.exclusive():  # index DDL checkpoints: KuzuBackend._quiet
                    conn.execute(
                        f"CALL CREATE_FTS_INDEX('Engram', '{FTS_INDEX}', "
                        "['content', 'summary', 'tags_text'])",
                    )
                created.append(FTS_INDEX)
            if VECTOR_INDEX not in existing:
                self._create_vector_index(int(dims))
                created.append(VECTOR_INDEX)
        if created:
            self._schema_epoch += 1
            log.info("kuzu indexes created", path=str(self.path), indexes=created)
        return created

    def _create_vector_index(self, dims: int) -> None:
        conn = self._conn()
        conn.execute(
            f"CREATE NODE TABLE IF NOT EXISTS EngramVec(id STRING, vec FLOAT[{dims}], "
            "PRIMARY KEY(id))",
        )
        conn.execute("MATCH (v:EngramVec) DELETE v")
        self.vector_index_dims = dims
        for page in self.embedding_pages():
            self._index_vectors(conn, [(k, v) for k, v in page if v.shape[0] == dims])
        with self._quiet.exclusive():  # index DDL checkpoints: see KuzuBackend._quiet
            conn.execute(
                f"CALL CREATE_VECTOR_INDEX('EngramVec', '{VECTOR_INDEX}', 'vec', "
                "metric := 'cosine')",
            )
        self.set_meta("vector_index_dims", str(dims))

    # -- metadata -------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        with self._exclusive(), self._errors():
            self._exec(
                self._conn(), "MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value}
            )


def _update_row(u: EngramUpdate) -> dict[str, Any]:
    """The id and the converted non-None fields of ``u``; new tags come with their
    ``tags_text``, which the lexical search (scan or FTS index) reads."""
    row: dict[str, Any] = {"id": u.id}
    for f in _UPDATABLE:
        value = getattr(u, f)
        if value is None:
            continue
        if f in ("last_accessed_at", "superseded_at"):
            value = ts_in(value)
        elif f == "tags":
            value = [str(t) for t in value]
            row["tags_text"] = " ".join(value)
        row[f] = value
    return row


def _merge_staged(groups: dict[tuple[str, ...], list[dict[str, Any]]]) -> None:
    """Fold the groups whose fields can all be staged into one group of every field they
    change, when together they are large enough to stage: one COPY and one join, not
    one per group (consolidation updates decay factors and cluster ids of overlapping
    sets of engrams)."""
    stageable = [f for f in groups if set(f) <= _STAGED_TYPES.keys()]
    if len(stageable) < 2 or sum(len(groups[f]) for f in stageable) < STAGED_UPDATE:
        return
    fields = tuple(f for f in _STAGED_TYPES if any(f in g for g in stageable))
    merged: dict[str, dict[str, Any]] = {}
    for g in stageable:
        for r in groups.pop(g):  # later updates of the same engram win, field by field
            merged.setdefault(r["id"], {}).update(r)
    groups[fields] = list(merged.values())


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """``rows`` as CSV for Kùzu's COPY, values converted a column at a time."""
    cells = [_csv_column([r.get(c) for r in rows]) for c in columns]
    out = io.StringIO(newline="")
    csv.writer(out).writerows(zip(*cells, strict=True))
    return out.getvalue()


def _csv_value(value: object) -> object:
    """A CSV cell Kùzu's COPY parses back to the same value (None is an empty cell)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, float):
        return repr(value)
    return value


def _csv_column(values: list[Any]) -> list[Any]:
    """``_csv_value`` of each value, with fast paths for all-number and all-timestamp
    columns (an import writes a million link rows sharing one timestamp)."""
    kinds = {type(v) for v in values} - {type(None)}
    if kinds == {str} and None not in values:
        return values  # the csv writer quotes what needs quoting
    if kinds <= {float, int}:
        return ["" if v is None else repr(v) for v in values]
    if kinds == {datetime}:
        text: dict[datetime, str] = {}
        return [
            "" if v is None else text.get(v) or text.setdefault(v, v.isoformat(sep=" "))
            for v in values
        ]
    return [_csv_value(v) for v in values]


def quote_path(path: str) -> str:
    """``path`` for a COPY statement (temporary paths never need quoting; refuse if so)."""
    if "'" in path or "\\" in path:
        raise ValueError(f"unsupported temporary path {path!r}")
    return path
