"""The writes of the embedded graph backend: add_memory, updates, deletes, import, indexes.

Every write converts and validates its input first, then runs in one transaction, and
updates what the backend keeps in memory (the cues, the engram ids) only after the
commit, so a failure leaves neither half-changed. A new memory is the exception: it is
journaled, then kept, then written by a background thread (``writebehind``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import lru_cache
from typing import Any

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
    utcnow,
)
from smriti_embedded_graph.bulk import copy_rows, csv_text
from smriti_embedded_graph.codec import (
    ENGRAM_CREATE,
    ENGRAM_SET,
    cue_params,
    engram_params,
    row_value,
    ts_in,
)
from smriti_embedded_graph.cuemap import CueMap
from smriti_embedded_graph.queries import Reader
from smriti_embedded_graph.rows import CUE_CREATE_ROW, RowWriter, assoc_row
from smriti_embedded_graph.store import GraphStore
from smriti_embedded_graph.writebehind import MemoryWrite, WriteBehind

log = get_logger(__name__)

BATCH = 2000
#: Deleting at least this many engrams at once is checkpointed at its end.
MASS_DELETE = BATCH
#: Up to this many updates of the same fields go one by one through the primary key.
SMALL_UPDATE = 32
FTS_INDEX = "engram_fts"
VECTOR_INDEX = "engram_vec"

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


@lru_cache(maxsize=256)
def _update_statement(fields: tuple[str, ...], n: int) -> str:
    """SET ``fields`` of engrams ``$id0..``, each matched by primary key, in one statement."""
    match = ", ".join(f"(e{i}:Engram {{id: $id{i}}})" for i in range(n))
    sets = ", ".join(f"e{i}.{f} = ${f}{i}" for i in range(n) for f in fields)
    return f"MATCH {match} SET {sets}"


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


class Writer:
    """add_memory, update/delete, import_records, ensure_indexes and meta writes.

    Kùzu's writes go through ``journal`` (after the queued memories), new memories'
    rows through ``rows``; what the writes change is kept in ``cues`` after each
    commit; ``reader`` answers the reads a write needs (a retried store's memory, the
    pages of embeddings an index is built from). ``native_indexes``: whether
    ``ensure_indexes`` builds Kùzu's full-text and HNSW indexes (only when no working
    set answers recall).
    """

    def __init__(
        self,
        store: GraphStore,
        cues: CueMap,
        journal: WriteBehind,
        rows: RowWriter,
        reader: Reader,
        native_indexes: bool,
    ) -> None:
        self._store = store
        self._cues = cues
        self._journal = journal
        self._rows = rows
        self._reader = reader
        self.native_indexes = native_indexes
        self._staging_ready = False
        self._worker: ThreadPoolExecutor | None = None
        self._worker_lock = threading.Lock()

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

    def shutdown_worker(self) -> None:
        """Wait for the worker's work and stop its thread (at close)."""
        with self._worker_lock:
            if self._worker is not None:
                self._worker.shutdown(wait=True)
                self._worker = None

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
            self._cues.check_dims(vector)
        with self._store.write_lock:
            retried = self._retried(engram)
            if retried is not None:
                return retried
            stored_cues, new_cues = self._cues.resolve(cues)
            self._check_new_ids(engram.id, new_cues)
            edges, cluster = found()
            if cluster != engram.cluster_id:
                engram = replace(engram, cluster_id=int(cluster))
            memory = MemoryWrite(
                row=engram_params(engram),
                new_cues=[cue_params(c) for c in new_cues],
                cue_ids=[c.id for c in stored_cues],
                assoc=[assoc_row(a) for a in edges],
            )
            memory.line = memory.to_line()
            self._store.check_store_room(len(memory.line))
            self._journal.enqueue(memory)
            self._cues.remember(new_cues)
            if self._cues.engram_ids is not None:
                self._cues.engram_ids.add(engram.id)
            if vector is not None and self._cues.dims is None:
                self._cues.dims = int(vector.shape[0])
        return StoredMemory(engram=engram, cues=stored_cues, associations=len(edges))

    def _retried(self, engram: Engram) -> StoredMemory | None:
        """The memory already stored under ``engram.id`` when this is a retry of it (the
        same content: nothing changes); None when the id is new. Other content under
        the id is refused by ``_check_new_ids``."""
        ids = self._cues.engram_ids
        if ids is None or engram.id not in ids:
            return None
        found = self._reader.get_engrams([engram.id])
        if not found or found[0].content != engram.content:
            return None
        links = self._reader.cues_of([engram.id])
        by_id = self._cues.by_id
        cues = [self._cues.stored(by_id[lk.cue_id]) for lk in links if lk.cue_id in by_id]
        return StoredMemory(engram=found[0], cues=cues, associations=0)

    def _check_new_ids(self, engram_id: str, new_cues: Sequence[Cue]) -> None:
        """Refuse what Kùzu would refuse in the background write: ids already taken."""
        ids = self._cues.engram_ids
        if ids is not None and engram_id in ids:
            raise BackendError(f"an engram with id {engram_id!r} is already stored")
        seen: set[str] = set()
        for cue in new_cues:
            if cue.id in self._cues.by_id or cue.id in seen:
                raise BackendError(f"a cue with id {cue.id!r} is already stored")
            seen.add(cue.id)

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
            with self._store.write_lock, self._store.errors(), self._journal.write() as conn:
                for fields, rows in groups.items():
                    sets = ", ".join(f"e.{f} = {row_value(f)}" for f in fields)
                    ids = self._cues.engram_ids
                    if len(rows) <= SMALL_UPDATE and ids is not None:
                        # One MATCH of several ids: only ids known to exist, or
                        # one unknown id would void the whole statement.
                        known = [r for r in rows if r["id"] in ids]
                        params = {f"{k}{i}": v for i, r in enumerate(known) for k, v in r.items()}
                        if known:
                            self._store.exec(conn, _update_statement(fields, len(known)), params)
                    elif len(rows) <= SMALL_UPDATE:
                        one = ", ".join(f"e.{f} = ${f}" for f in fields)
                        for r in rows:
                            self._store.exec(conn, f"MATCH (e:Engram {{id: $id}}) SET {one}", r)
                    elif len(rows) >= STAGED_UPDATE and set(fields) <= set(_STAGED_TYPES):
                        self._staged_update(conn, fields, rows)
                    else:
                        self._store.exec(
                            conn,
                            f"UNWIND $rows AS r MATCH (e:Engram {{id: r.id}}) SET {sets}",
                            {"rows": rows},
                        )

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams with their edges; returns how many existed."""
        unique = list(dict.fromkeys(ids))
        deleted: list[str] = []
        with self._store.write_lock:
            self._store.lower_manifest(len(unique))
            for batch in batched(unique, BATCH):
                with self._store.errors(), self._journal.write() as conn:
                    found = list(self._existing(conn, "Engram", set(), batch))
                    if found:
                        self._journal.journal_forgotten(found)  # before Kùzu may hold the delete
                        self._store.exec(
                            conn,
                            "UNWIND $ids AS i MATCH (e:Engram {id: i}) DETACH DELETE e",
                            {"ids": found},
                        )
                        self._rows.unindex_vectors(conn, found)
                deleted.extend(found)
                if self._cues.engram_ids is not None:
                    self._cues.engram_ids.difference_update(found)
            if len(deleted) >= MASS_DELETE:
                # A mass deletion (consolidation's pruning) touches rows all through the
                # tables, and its checkpoint rewrites them. Done now, that rewrite no
                # longer coincides with the caller's next large write (consolidation's
                # update of every memory), whose own memory it would add to.
                self._journal.checkpoint(force=True)
        return len(deleted)

    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy, with their CoOccurs edges."""
        self._journal.fold_cooccurrences()
        with self._store.write_lock, self._store.errors(), self._journal.write() as conn:
            rows = self._store.exec(
                conn,
                "MATCH (c:Cue) WHERE NOT EXISTS { MATCH (:Engram)-[:EncodedBy]->(c) } RETURN c.id",
            ).get_all()
            ids = [r[0] for r in rows]
            if ids:
                self._store.exec(
                    conn, "UNWIND $ids AS i MATCH (c:Cue {id: i}) DETACH DELETE c", {"ids": ids}
                )
        self._cues.forget(set(ids))
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
        self._journal.fold_cooccurrences()  # imported strengths replace, never add to, pending ones
        erows = [engram_params(e) for e in engrams]
        vectors = [(e.id, as_vector(e.embedding)) for e in engrams if e.embedding is not None]
        widths = {v.shape[0] for _, v in vectors} | (
            {self._cues.dims} if self._cues.dims else set()
        )
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
        arows = [assoc_row(a, now_at) for a in associations]
        orows = [
            {"a": c.source_id, "b": c.target_id, "s": float(c.strength)} for c in cooccurrences
        ]

        # The links' CSV is made on the worker while Kùzu creates the engrams (it
        # releases the GIL); used when every link is new, as when restoring.
        link_columns = ("e", "c", "s", "ts")
        link_text = self.worker().submit(csv_text, lrows, link_columns) if lrows else None
        with self._store.write_lock:
            with self._store.errors(), self._journal.write() as conn:
                fresh_e: set[str] = set()
                for batch in batched(erows, BATCH):
                    fresh_e |= self._upsert(conn, "Engram", batch, ENGRAM_CREATE, ENGRAM_SET)
                fresh_c: set[str] = set()
                for batch in batched(crows, BATCH):
                    fresh_c |= self._upsert(conn, "Cue", batch, CUE_CREATE_ROW, _CUE_SET)
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
                        self._store.exec(conn, _update_edges(table), {"rows": batch})
                if self._store.vector_index_dims:
                    self._rows.unindex_vectors(conn, [key for key, _ in vectors])
                    dims = self._store.vector_index_dims
                    self._rows.index_vectors(
                        conn, [(k, v) for k, v in vectors if v.shape[0] == dims]
                    )
                # The COPYs come last: rolling back a transaction that COPYed into a rel table
                # loses that table's earlier edges in Kùzu 0.11.3 (README, "Known defects"),
                # so nothing that could fail for other reasons runs after them.
                for table, copy, columns in copies:
                    # ``copy`` keeps the order of ``rows``: as long as lrows, it is lrows.
                    whole = link_text is not None and len(copy) == len(lrows)
                    text = link_text.result() if table == "EncodedBy" and whole else None
                    copy_rows(self._store, conn, table, copy, columns, text)
            try:  # after the commit, under the write lock (a store merges on cue names)
                self._after_import(engrams, cues, widths)
            except BaseException:
                self._reload_cues()
                raise

    def _existing(self, conn: Any, table: str, known: set[str], ids: list[str]) -> set[str]:
        """``known`` plus those of ``ids`` that exist in ``table`` (from the ids kept in
        memory: an ``UNWIND`` join scans the whole table)."""
        unknown = set(ids) - known
        if table == "Engram" and self._cues.engram_ids is not None:
            return known | (unknown & self._cues.engram_ids)
        if table == "Cue":
            return known | {i for i in unknown if i in self._cues.by_id}
        if not unknown:
            return known
        rows = self._store.exec(
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
        with self._journal.exclusive(), self._store.errors():
            conn = self._store.conn()
            with self._store.quiet.exclusive():  # DDL commits: see GraphStore.quiet
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
            self._store.exec(conn, _STAGE_ROWS, {"rows": batch})
        sets = ", ".join(f"e.{f} = coalesce(s.{f}, e.{f})" for f in fields)
        self._store.exec(
            conn, f"MATCH (e:Engram), (s:{STAGING_TABLE}) WHERE e.id = s.id SET {sets}"
        )
        self._store.exec(conn, f"MATCH (s:{STAGING_TABLE}) DELETE s")

    def _existing_edges(self, conn: Any, table: str, sources: set[str]) -> set[tuple[str, str]]:
        """(source id, target id) of the ``table`` edges leaving ``sources``."""
        if not sources:
            return set()
        src, _, dst, _ = _EDGE_ENDS[table]
        # An empty table (the edges of a restore come after its nodes) needs no search.
        empty = f"MATCH (a:{src})-[:{table}]->(b:{dst}) RETURN 1 LIMIT 1"
        if not self._store.exec(conn, empty).get_all():
            return set()
        found: set[tuple[str, str]] = set()
        for batch in batched(sorted(sources), BATCH):
            rows = self._store.exec(
                conn,
                f"MATCH (a:{src})-[:{table}]->(b:{dst}) WHERE a.id IN $ids RETURN a.id, b.id",
                {"ids": batch},
            ).get_all()
            found.update((r[0], r[1]) for r in rows)
        return found

    def _upsert(
        self, conn: Any, table: str, rows: list[dict[str, Any]], create: str, update: str
    ) -> set[str]:
        """Create new rows, update existing ones; returns the ids created."""
        existing = self._existing(conn, table, set(), [r["id"] for r in rows])
        fresh = [r for r in rows if r["id"] not in existing]
        if fresh:
            self._store.exec(conn, f"UNWIND $rows AS r {create}", {"rows": fresh})
        if existing:
            replaced = [r for r in rows if r["id"] in existing]
            self._store.exec(
                conn,
                f"UNWIND $rows AS r MATCH (e:{table} {{id: r.id}}) SET {update}",
                {"rows": replaced},
            )
        return {r["id"] for r in fresh}

    def _reload_cues(self) -> None:
        """Read the cues and engram ids from the store again (after a failed update)."""
        self._cues.clear()
        self._reader.load_cue_map()

    def _after_import(
        self, engrams: Sequence[Engram], cues: Sequence[Cue], widths: set[int]
    ) -> None:
        """Keep the imported cues and engram ids (after the commit)."""
        self._cues.forget({c.id for c in cues})
        self._cues.remember(cues)
        if self._cues.engram_ids is not None:
            self._cues.engram_ids.update(e.id for e in engrams)
        if widths and self._cues.dims is None:
            self._cues.dims = next(iter(widths))

    # -- vector index table (only without a working set; see DESIGN.md) -------------------
    def drop_unused_text_index(self) -> None:
        """Drop an FTS index left by a session without a working set: the working set
        serves text search now, and the index would slow every write and delete (it is
        rebuilt by a session without one)."""
        if self.native_indexes or FTS_INDEX not in self._reader.index_names():
            return
        with self._journal.exclusive(), self._store.errors():
            conn = self._store.conn()
            with self._store.quiet.exclusive():  # DDL and checkpoint: see GraphStore.quiet
                conn.execute(f"CALL DROP_FTS_INDEX('Engram', '{FTS_INDEX}')")
                conn.execute("CHECKPOINT")
        self._store.schema_epoch += 1
        log.info(
            "kuzu text index dropped: the working set serves text search",
            path=str(self._store.path),
        )

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Above ``min_engrams``, when no working set answers recall (``native_indexes``):
        the full-text and HNSW indexes.

        With a working set, neither is built: an HNSW index costs 17 ms on every insert
        (43 s to build at 10k), the FTS index ~0.3 ms on every store and made deleting
        engrams 50x slower (5,000 at 100k: 4.8 s instead of 0.09 s; DESIGN.md).
        """
        if not self.native_indexes or self._reader.count_engrams() <= min_engrams:
            return []
        created: list[str] = []
        with self._journal.exclusive(), self._store.errors():
            existing = self._reader.index_names()
            if FTS_INDEX not in existing:
                conn = self._store.conn()
                with self._store.quiet.exclusive():  # index DDL checkpoints: GraphStore.quiet
                    conn.execute(
                        f"CALL CREATE_FTS_INDEX('Engram', '{FTS_INDEX}', "
                        "['content', 'summary', 'tags_text'])",
                    )
                created.append(FTS_INDEX)
            if VECTOR_INDEX not in existing:
                self._create_vector_index(int(dims))
                created.append(VECTOR_INDEX)
        if created:
            self._store.schema_epoch += 1
            log.info("kuzu indexes created", path=str(self._store.path), indexes=created)
        return created

    def _create_vector_index(self, dims: int) -> None:
        conn = self._store.conn()
        conn.execute(
            f"CREATE NODE TABLE IF NOT EXISTS EngramVec(id STRING, vec FLOAT[{dims}], "
            "PRIMARY KEY(id))",
        )
        conn.execute("MATCH (v:EngramVec) DELETE v")
        self._store.vector_index_dims = dims
        for page in self._reader.embedding_pages():
            self._rows.index_vectors(conn, [(k, v) for k, v in page if v.shape[0] == dims])
        with self._store.quiet.exclusive():  # index DDL checkpoints: see GraphStore.quiet
            conn.execute(
                f"CALL CREATE_VECTOR_INDEX('EngramVec', '{VECTOR_INDEX}', 'vec', "
                "metric := 'cosine')",
            )
        self.set_meta("vector_index_dims", str(dims))

    # -- metadata -------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        with self._journal.exclusive(), self._store.errors():
            self._store.exec(
                self._store.conn(),
                "MERGE (m:Meta {key: $k}) SET m.value = $v",
                {"k": key, "v": value},
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
