"""Erasing forgotten memories from the Kùzu store's files (``erase_deleted``).

Deleting a row in Kùzu 0.11.3 does not erase its bytes. Measured with a unique token
(``bench/erase.py``): after ``DETACH DELETE`` and ``CHECKPOINT`` the token stays in
``memory.kuzu``; a checkpoint rewrites a changed column chunk to new pages and leaves
the old ones free but unwritten, and the new chunk carries the deleted string along in
its dictionary (600 more inserts and a checkpoint made two *new* copies of it);
rewriting the column (``SET e.content = e.content + ''``), or copying the table and
dropping the old one, frees pages without zeroing them. Kùzu has no ``VACUUM``.

What does erase it is a new file: ``EXPORT DATABASE`` writes the live rows only, and
``IMPORT DATABASE`` into an empty database builds a file that never held the deleted
ones. ``erase_deleted`` therefore, with every other write and read of the store held
off: writes the queued memories, checkpoints (Kùzu's WAL is then gone and the journal
trimmed to nothing), exports the store into a scratch folder beside it, closes the
database, imports the export into a new file, puts that file in place of the old one
with one rename, reopens it and removes the scratch folder. Its cost grows with the
store (figures: bench/README.md, `erase.py`). A failure before the rename reopens the old file as it
was; a crash leaves the scratch folder, which the next open or erase removes.
"""

from __future__ import annotations

import csv
import os
import shutil
import time
from pathlib import Path
from typing import Any

from smriti import get_logger
from smriti.backend import BackendError, private_dir
from smriti_embedded_graph.cuemap import CueMap
from smriti_embedded_graph.store import GraphStore
from smriti_embedded_graph.writebehind import WriteBehind

log = get_logger(__name__)

#: The scratch folder beside the database (``memory.kuzu.erase``).
SCRATCH_SUFFIX = ".erase"


class Eraser:
    """``erase_deleted``: rebuild ``store``'s database file from its live rows, with
    ``journal`` (every other read and write) held off; dropped cues leave ``cues``.
    ``export_format``: the engine's ``EXPORT DATABASE`` format (``csv`` or ``parquet``)."""

    def __init__(
        self, store: GraphStore, cues: CueMap, journal: WriteBehind, export_format: str
    ) -> None:
        self._store = store
        self._cues = cues
        self._journal = journal
        self.export_format = export_format
        self.path = store.path

    @property
    def erase_scratch(self) -> Path:
        """Where an erase exports the store and builds the new file."""
        return self.path.with_name(self.path.name + SCRATCH_SUFFIX)

    def clear_erase_scratch(self) -> None:
        """Remove what an interrupted erase left (it holds the store's texts)."""
        if self.erase_scratch.exists():
            shutil.rmtree(self.erase_scratch, ignore_errors=True)
            log.warning("kuzu: removed what an interrupted erase left", path=str(self.path))

    def erase_deleted(self) -> int:
        """Drop the cues no memory is EncodedBy and rewrite the store so that no file
        under it holds a deleted memory's or cue's bytes: the journal and WAL are
        emptied by a checkpoint, and the database file is rebuilt from its live rows
        (the module docstring says why). Returns how many cues were dropped. Raises
        BackendError when it cannot; the store is then as it was (the memories stay
        deleted), and the next erase tries again."""
        began = time.monotonic()
        self._journal.fold_cooccurrences()  # the pending rows name cues, and are exported too
        with self._journal.exclusive():  # the queued memories are written first
            self._store.check_room(
                2 * self._store.db_size_hint(), "the deleted memories were not erased"
            )
            if not self._journal.checkpoint(force=True):
                raise BackendError(
                    f"cannot checkpoint {self.path}: the deleted memories were deleted but "
                    "not yet erased from its files; free disk space and forget again"
                )
            with self._store.quiet.exclusive():
                dropped = self._rebuild_file()
        self._cues.forget(dropped)
        self._store.save_manifest()
        log.info(
            "kuzu: deleted memories erased",
            path=str(self.path),
            cues=len(dropped),
            seconds=round(time.monotonic() - began, 2),
            bytes=self._store.db_size_hint(),
        )
        return len(dropped)

    def _rebuild_file(self) -> set[str]:
        """Export, close, import into a new file, swap it in, reopen (locks held).
        Returns the ids of the orphaned cues left out."""
        self.clear_erase_scratch()
        scratch = private_dir(self.erase_scratch)
        export, fresh = scratch / "export", scratch / self.path.name
        try:
            conn = self._store.conn()
            if self.export_format != "csv":
                dropped = self._delete_orphaned_cues(conn)
            try:
                conn.execute(f"EXPORT DATABASE '{_quoted(export)}' (format='{self.export_format}')")
            except RuntimeError as exc:
                raise BackendError(f"cannot export {self.path} to erase: {exc}") from exc
            if self.export_format == "csv":
                dropped = _export_live_cues(export)
            try:
                self._store.close_for_swap()
                _import(self._store.driver, fresh, export, self._store.native_extensions)
                self._store.lower_manifest_size(fresh.stat().st_size)
                # The old file was checkpointed and closed: a WAL left beside it holds
                # nothing the export lacks, and must not be replayed into the new file.
                self.path.with_name(self.path.name + ".wal").unlink(missing_ok=True)
                os.replace(fresh, self.path)
                _sync_dir(self.path.parent)
            finally:
                self._store.reopen_after_swap()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return dropped

    def _delete_orphaned_cues(self, conn: Any) -> set[str]:
        """Delete the cues no memory is EncodedBy (with their CoOccurs edges) from the
        old file before it is exported; returns their ids. For an engine whose export
        is not CSV (LadybugDB writes only parquet), so the export cannot be filtered
        as text; the deletion in the old file crashed only Kùzu 0.11.3, which exports
        CSV (``_export_live_cues``)."""
        orphans = "MATCH (c:Cue) WHERE NOT EXISTS { MATCH (:Engram)-[:EncodedBy]->(c) }"
        try:
            dropped = {r[0] for r in conn.execute(f"{orphans} RETURN c.id").get_all()}
            if dropped:
                with self._store.transaction(conn):
                    conn.execute(
                        "UNWIND $ids AS i MATCH (c:Cue {id: i}) DETACH DELETE c",
                        {"ids": sorted(dropped)},
                    )
                conn.execute("COMMIT")
                conn.execute("CHECKPOINT")
        except RuntimeError as exc:
            raise BackendError(f"cannot drop the orphaned cues of {self.path}: {exc}") from exc
        self._cues.forget(dropped)  # gone from the file even if the rebuild fails
        return dropped


def _export_live_cues(export: Path) -> set[str]:
    """Drop from the export the cues no memory is EncodedBy, with their CoOccurs
    edges; returns their ids.

    The orphans are left out of the new file rather than deleted from the old one, and
    the export's CSV files are filtered here rather than queried: in a session that had
    stored a memory and then deleted it, ``MATCH (c:Cue {id: $i}) DELETE c`` on its new
    cues, and a ``COPY (MATCH (c:Cue) ...) TO`` after the export, crashed Kùzu 0.11.3
    (SIGSEGV); the export itself was sound."""
    cues, links = export / "Cue.csv", export / "EncodedBy_Engram_Cue.csv"
    used = {_fields(r)[1] for r in _records(links.read_text(encoding="utf-8"))}
    dropped: set[str] = set()
    kept: list[str] = []
    for record in _records(cues.read_text(encoding="utf-8")):
        cue = _fields(record)[0]
        if cue in used:
            kept.append(record)
        else:
            dropped.add(cue)
    if not dropped:
        return dropped
    _rewrite(cues, kept)
    edges = export / "CoOccurs_Cue_Cue.csv"
    _rewrite(edges, [
        r for r in _records(edges.read_text(encoding="utf-8"))
        if not dropped.intersection(_fields(r)[:2])
    ])  # fmt: skip
    return dropped


def _records(text: str) -> list[str]:
    """The records of a CSV text as written: lines, rejoined while a quoted field
    holding a newline is open (an odd count of quotes so far)."""
    records: list[str] = []
    open_record: list[str] = []
    quotes = 0
    for line in text.split("\n"):
        if not open_record and '"' not in line:
            if line:
                records.append(line)
            continue
        open_record.append(line)
        quotes += line.count('"')
        if quotes % 2 == 0:
            records.append("\n".join(open_record))
            open_record, quotes = [], 0
    if open_record:
        records.append("\n".join(open_record))
    return records


def _fields(record: str) -> list[str]:
    """The record's fields (the ids are the first ones, never quoted by Smriti)."""
    if '"' not in record:
        return record.split(",")
    return next(csv.reader([record]))


def _rewrite(path: Path, records: list[str]) -> None:
    """Replace the file's records (each written back exactly as it was)."""
    path.write_text("".join(r + "\n" for r in records), encoding="utf-8")


def _import(driver: Any, target: Path, export: Path, extensions: bool) -> None:
    """A new database at ``target`` holding the export (its indexes rebuilt). An engine
    without its extensions never built an index, so its export has no index statement."""
    db = driver.Database(str(target), auto_checkpoint=False)
    try:
        conn = driver.Connection(db)
        for extension in ("fts", "vector") if extensions else ():
            conn.execute(f"LOAD {extension}")
        conn.execute(f"IMPORT DATABASE '{_quoted(export)}'")
        conn.execute("CHECKPOINT")
        conn.close()
    except RuntimeError as exc:
        raise BackendError(f"cannot rebuild {target.name} to erase: {exc}") from exc
    finally:
        db.close()


def _quoted(path: Path) -> str:
    """``path`` inside a single-quoted Cypher string (Kùzu takes no parameter there)."""
    text = path.as_posix()
    if "'" in text or "\\" in text:
        raise BackendError(
            f"cannot erase in {path.parent}: Kùzu cannot export to a path holding a quote "
            "or backslash; move STORAGE_LOCATION to a plainer path"
        )
    return text


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
