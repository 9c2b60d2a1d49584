"""The SQLite backend's writes: memories, updates, deletes, import and metadata.

Each method converts its input first (a bad embedding fails before anything is
written), then runs in one write transaction (``Database.write``). Edges to
endpoints that do not exist are skipped by ``INSERT ... SELECT ... WHERE EXISTS``;
deletes cascade through the foreign keys.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

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
from smriti.default_plugins.sqlite.codec import (
    CUE_COLUMNS,
    ENGRAM_COLUMNS,
    cue_from_row,
    engram_from_row,
    engram_row,
    ts_in,
    ts_maybe_in,
    vec_in,
)
from smriti.default_plugins.sqlite.database import Database
from smriti.default_plugins.sqlite.lexical import document_terms, write_postings

#: Ids per ``IN (...)`` list (well under SQLite's variable limit).
CHUNK = 500

_INSERT_ENGRAM = (
    f"INSERT INTO engram ({ENGRAM_COLUMNS}) VALUES (:id, :content, :summary, :memory_type, "
    ":importance, :access_count, :created_at, :last_accessed_at, :decay_factor, :embedding, "
    ":source, :tags, :cluster_id, :supersedes, :superseded_by, :superseded_at, :origin, "
    ":principal)"
)
_REPLACE_ENGRAM = (
    "UPDATE engram SET content = :content, summary = :summary, memory_type = :memory_type, "
    "importance = :importance, access_count = :access_count, created_at = :created_at, "
    "last_accessed_at = :last_accessed_at, decay_factor = :decay_factor, "
    "embedding = :embedding, source = :source, tags = :tags, cluster_id = :cluster_id, "
    "supersedes = :supersedes, superseded_by = :superseded_by, superseded_at = :superseded_at, "
    "origin = :origin, principal = :principal WHERE id = :id"
)
_UPDATE_ENGRAM = (
    "UPDATE engram SET access_count = coalesce(:access_count, access_count), "
    "last_accessed_at = coalesce(:last_accessed_at, last_accessed_at), "
    "decay_factor = coalesce(:decay_factor, decay_factor), "
    "cluster_id = coalesce(:cluster_id, cluster_id), "
    "importance = coalesce(:importance, importance), tags = coalesce(:tags, tags), "
    "superseded_by = coalesce(:superseded_by, superseded_by), "
    "superseded_at = coalesce(:superseded_at, superseded_at) WHERE id = :id"
)
_LINK = (
    "INSERT INTO link (engram_id, cue_id, strength, created_at) SELECT :e, :c, :s, :ts "
    "WHERE EXISTS (SELECT 1 FROM engram WHERE id = :e) "
    "AND EXISTS (SELECT 1 FROM cue WHERE id = :c) ON CONFLICT (engram_id, cue_id) "
    "DO UPDATE SET strength = excluded.strength"
)
_ASSOCIATION = (
    "INSERT INTO association (source_id, target_id, strength, relation_type, created_at) "
    "SELECT :a, :b, :s, :t, :ts WHERE EXISTS (SELECT 1 FROM engram WHERE id = :a) "
    "AND EXISTS (SELECT 1 FROM engram WHERE id = :b) ON CONFLICT (source_id, target_id) "
    "DO UPDATE SET strength = excluded.strength, relation_type = excluded.relation_type"
)
_COOCCURS_ADD = (
    "INSERT INTO cooccurrence (source_id, target_id, strength) VALUES (?, ?, 1.0) "
    "ON CONFLICT (source_id, target_id) DO UPDATE SET strength = strength + 1.0"
)
_COOCCURS_SET = (
    "INSERT INTO cooccurrence (source_id, target_id, strength) SELECT :a, :b, :s "
    "WHERE EXISTS (SELECT 1 FROM cue WHERE id = :a) "
    "AND EXISTS (SELECT 1 FROM cue WHERE id = :b) "
    "ON CONFLICT (source_id, target_id) DO UPDATE SET strength = excluded.strength"
)


def _bump(conn: sqlite3.Connection, table: str) -> None:
    """Tell every vector table of ``table`` (any process) to reload."""
    conn.execute("UPDATE epoch SET value = value + 1 WHERE name = ?", (table,))


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _update_row(u: EngramUpdate) -> dict[str, Any]:
    """Named parameters of ``_UPDATE_ENGRAM`` (None: the column keeps its value)."""

    def maybe[T](value: object, convert: Callable[[Any], T]) -> T | None:
        return None if value is None else convert(value)

    return {
        "id": u.id,
        "access_count": maybe(u.access_count, int),
        "last_accessed_at": maybe(u.last_accessed_at, ts_in),
        "decay_factor": maybe(u.decay_factor, float),
        "cluster_id": maybe(u.cluster_id, int),
        "importance": maybe(u.importance, float),
        "tags": maybe(u.tags, lambda t: json.dumps([str(x) for x in t], ensure_ascii=False)),
        "superseded_by": maybe(u.superseded_by, str),
        "superseded_at": ts_maybe_in(u.superseded_at),
    }


def _association_row(a: Association) -> dict[str, Any]:
    created = ts_in(a.created_at or utcnow())
    return {
        "a": a.source_id,
        "b": a.target_id,
        "s": float(a.strength),
        "t": a.relation_type,
        "ts": created,
    }


class Writer:
    """Every write of the StorageBackend contract, each one transaction of ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- metadata -------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Nothing to create: the SQL indexes and the postings table exist from the first
        open, and vector search is an exact scan at every size."""
        return []

    # -- add_memory ---------------------------------------------------------------------
    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Store one memory atomically (see StorageBackend.add_memory)."""
        row = engram_row(engram)
        counts = document_terms(engram.content, engram.summary, engram.tags)
        edges = [_association_row(a) for a in associations]
        with self._db.write("the memory was not stored") as conn:
            old = conn.execute("SELECT content FROM engram WHERE id = ?", (engram.id,)).fetchone()
            if old is not None:
                if old[0] != engram.content:
                    raise BackendError(
                        f"an engram with id {engram.id!r} is already stored with other content"
                    )
                return self._stored_as_is(conn, engram.id)
            stored = self._merge_cues(conn, cues)
            seq = conn.execute(_INSERT_ENGRAM, row).lastrowid
            write_postings(conn, int(seq or 0), counts)
            now = ts_in(utcnow())
            links = [{"e": engram.id, "c": c.id, "s": 1.0, "ts": now} for c in stored]
            conn.executemany(_LINK, links)
            pairs = [(a.id, b.id) for a in stored for b in stored if a.id != b.id]
            conn.executemany(_COOCCURS_ADD, pairs)
            conn.executemany(_ASSOCIATION, edges)
        return StoredMemory(engram=engram, cues=stored, associations=len(edges))

    def _stored_as_is(self, conn: sqlite3.Connection, engram_id: str) -> StoredMemory:
        """A repeated store: the memory and its cues as they are."""
        row = conn.execute(
            f"SELECT {ENGRAM_COLUMNS} FROM engram WHERE id = ?", (engram_id,)
        ).fetchone()
        cues = conn.execute(
            f"SELECT {', '.join('c.' + c for c in CUE_COLUMNS.split(', '))} FROM link AS l "
            "JOIN cue AS c ON c.id = l.cue_id WHERE l.engram_id = ? ORDER BY c.id",
            (engram_id,),
        ).fetchall()
        return StoredMemory(engram=engram_from_row(row), cues=[cue_from_row(r) for r in cues])

    def _merge_cues(self, conn: sqlite3.Connection, cues: Iterable[Cue]) -> list[Cue]:
        """The memory's cues as stored: an existing cue of the same normalised name is
        reused (its id and embedding kept), a new one inserted; duplicates collapse."""
        stored: dict[str, Cue] = {}
        for cue in cues:
            key = normalise_cue_name(cue.name)
            if key in stored:
                continue
            found = conn.execute(
                f"SELECT {CUE_COLUMNS} FROM cue WHERE key = ? ORDER BY seq DESC LIMIT 1", (key,)
            ).fetchone()
            if found is not None:
                stored[key] = cue_from_row(found)
                continue
            vector = None if cue.embedding is None else as_vector(cue.embedding)
            try:
                conn.execute(
                    "INSERT INTO cue (id, name, key, cue_type, embedding) VALUES (?, ?, ?, ?, ?)",
                    (cue.id, cue.name, key, cue.cue_type, vec_in(vector)),
                )
            except sqlite3.IntegrityError as exc:
                raise BackendError(f"a cue with id {cue.id!r} is already stored") from exc
            stored[key] = Cue(cue.id, cue.name, cue.cue_type, vector)
        return list(stored.values())

    # -- updates and deletes ------------------------------------------------------------
    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply partial updates in one transaction; unknown ids are ignored. A new tag
        list re-indexes the engram's postings, so text search follows the tags."""
        rows = [_update_row(u) for u in updates]
        if not rows:
            return
        retagged = list(dict.fromkeys(u.id for u in updates if u.tags is not None))
        with self._db.write() as conn:
            conn.executemany(_UPDATE_ENGRAM, rows)
            for chunk in batched(retagged, CHUNK):
                found = conn.execute(
                    f"SELECT seq, content, summary, tags FROM engram WHERE id IN "
                    f"({_marks(len(chunk))})",
                    chunk,
                ).fetchall()
                for seq, content, summary, tags in found:
                    conn.execute("DELETE FROM posting WHERE engram_seq = ?", (seq,))
                    write_postings(conn, seq, document_terms(content, summary, json.loads(tags)))

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete engrams; their links, associations and postings go with them (cascade)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return 0
        deleted = 0
        with self._db.write("nothing was deleted") as conn:
            for chunk in batched(unique, CHUNK):
                cursor = conn.execute(
                    f"DELETE FROM engram WHERE id IN ({_marks(len(chunk))})", chunk
                )
                deleted += cursor.rowcount
            if deleted:
                _bump(conn, "engram")
        return deleted

    def erase_deleted(self) -> int:
        """Drop the orphaned cues, then truncate the WAL. Deleted rows are zeroed in
        place (every connection has ``secure_delete`` on), but the WAL's frames still
        hold the pages as they were before: a TRUNCATE checkpoint copies the zeroed
        pages into the file and empties the WAL. Returns how many cues were dropped."""
        dropped = self.delete_orphan_cues()
        self._db.truncate_wal("the memories were deleted but not yet erased from the store's WAL")
        return dropped

    def delete_orphan_cues(self) -> int:
        """Delete cues no engram is EncodedBy; their CoOccurs edges go with them."""
        with self._db.write("nothing was deleted") as conn:
            deleted = conn.execute(
                "DELETE FROM cue WHERE NOT EXISTS (SELECT 1 FROM link WHERE link.cue_id = cue.id)"
            ).rowcount
            if deleted:
                _bump(conn, "cue")
        return deleted

    # -- import -------------------------------------------------------------------------
    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records as given, in one transaction; existing ids are replaced in
        place (their edges stay), edges to endpoints that do not exist are skipped."""
        engram_rows = {
            e.id: (engram_row(e), document_terms(e.content, e.summary, e.tags)) for e in engrams
        }
        cue_rows = {
            c.id: (c.id, c.name, normalise_cue_name(c.name), c.cue_type, vec_in(c.embedding))
            for c in cues
        }
        now = ts_in(utcnow())
        link_rows = [
            {"e": lk.engram_id, "c": lk.cue_id, "s": float(lk.strength), "ts": now} for lk in links
        ]
        assoc_rows = [_association_row(a) for a in associations]
        cooc_rows = [
            {"a": c.source_id, "b": c.target_id, "s": float(c.strength)} for c in cooccurrences
        ]
        with self._db.write("nothing was imported") as conn:
            self._import_engrams(conn, engram_rows)
            self._import_cues(conn, list(cue_rows.values()))
            conn.executemany(_LINK, link_rows)
            conn.executemany(_ASSOCIATION, assoc_rows)
            conn.executemany(_COOCCURS_SET, cooc_rows)

    def _existing(self, conn: sqlite3.Connection, table: str, ids: Sequence[str]) -> dict[str, int]:
        """id -> seq of those ``ids`` stored in ``table``."""
        found: dict[str, int] = {}
        for chunk in batched(ids, CHUNK):
            rows = conn.execute(
                f"SELECT id, seq FROM {table} WHERE id IN ({_marks(len(chunk))})", chunk
            )
            found.update(rows)
        return found

    def _import_engrams(
        self, conn: sqlite3.Connection, rows: dict[str, tuple[dict[str, Any], Any]]
    ) -> None:
        if not rows:
            return
        old = self._existing(conn, "engram", list(rows))
        conn.executemany(_REPLACE_ENGRAM, [row for key, (row, _) in rows.items() if key in old])
        conn.executemany(_INSERT_ENGRAM, [row for key, (row, _) in rows.items() if key not in old])
        if old:
            for chunk in batched(list(old.values()), CHUNK):
                conn.execute(
                    f"DELETE FROM posting WHERE engram_seq IN ({_marks(len(chunk))})", chunk
                )
            _bump(conn, "engram")
        seqs = self._existing(conn, "engram", list(rows))
        for key, (_, counts) in rows.items():
            write_postings(conn, seqs[key], counts)

    def _import_cues(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        old = self._existing(conn, "cue", [r[0] for r in rows])
        conn.executemany(
            "UPDATE cue SET name = ?, key = ?, cue_type = ?, embedding = ? WHERE id = ?",
            [(*r[1:], r[0]) for r in rows if r[0] in old],
        )
        conn.executemany(
            "INSERT INTO cue (id, name, key, cue_type, embedding) VALUES (?, ?, ?, ?, ?)",
            [r for r in rows if r[0] not in old],
        )
        if old:
            _bump(conn, "cue")
