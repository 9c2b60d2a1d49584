"""New memories written to Kùzu after the store returns, from a durable journal.

A store does not wait for Kùzu. Under the backend's write lock it appends the memory's
rows to a journal file next to the database (``memory.kuzu.journal``, one JSON line,
fsynced: about 0.3 ms), keeps its id and new cues in memory and returns. A background
thread then writes every queued memory in one Kùzu transaction. The journal keeps a
memory until Kùzu has checkpointed it into the database file (``checkpoint``), so
neither a crash nor a damaged Kùzu WAL can lose it. At 100k memories, the statements
and the commit were 6-7 ms of a 9-10 ms store.

Kùzu never lags behind what a caller saw: every query of the store (``query``: every
native read, listing, statistics, export, backup) and every other write (``write``:
updates, deletes, imports, folding co-occurrences) first writes what is queued, in
order; the backend's collaborators reach Kùzu through this class for that reason. A
crash or kill before the background write loses nothing: the next open writes the
journal's memories that Kùzu does not have, before anything else; a delete first
appends a line naming the memories it deletes, so that those are not among them. A
journal line cut short by a crash is a store that never returned, and is ignored. A store is
acknowledged only once its whole line is written and fsynced; a short write or a failed
fsync cuts the line back off and fails the store (``durability``: on a full disk, with
a "disk full" error).

Locks, always taken in this order: the write lock (one logical writer: a store's
enqueue, an update, a delete), then the Kùzu lock (one Kùzu write transaction at a
time: the background write holds only this one, so stores need not wait for it), then
the queue lock (the queue and the journal file).
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol

from smriti import get_logger
from smriti.backend import BackendError, StorageFullError, open_private
from smriti_embedded_graph import cooccurs, durability
from smriti_embedded_graph.cooccurs import CoOccurrences
from smriti_embedded_graph.store import GraphStore

log = get_logger(__name__)

JOURNAL_SUFFIX = ".journal"
#: The key of a journal line listing memories being deleted (``_journal_forgotten``).
FORGOTTEN = "forgotten"
#: Checkpoint (and so empty the journal) once it is this large.
JOURNAL_CHECKPOINT_BYTES = 16 * 2**20
#: Node offsets per chunk of an unordered read of a table (the working set's load).
OFFSET_CHUNK = 10_000
#: What a failed journal append means when the disk (or the file-size limit) is full.
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: The row fields that hold times (naive UTC datetimes for Kùzu, ISO text in the journal).
_ROW_TIMES = ("created_at", "last_accessed_at", "superseded_at")
#: Row fields a journal line written by an older version lacks, with their values then:
#: a memory stored before an upgrade and replayed after it is a first, current version.
_ROW_DEFAULTS: dict[str, Any] = {
    "supersedes": "",
    "superseded_by": "",
    "superseded_at": None,
    "origin": "",
    "principal": "",
}


@dataclass
class MemoryWrite:
    """The Kùzu rows of one new memory, as converted for its statements."""

    #: The engram's parameters (``engram_params``), its cluster already chosen.
    row: dict[str, Any]
    #: Parameters of the cues created with it (``cue_params``).
    new_cues: list[dict[str, Any]]
    #: Every cue it is EncodedBy (new or existing), in order.
    cue_ids: list[str]
    #: Its AssociatedWith edges (``_assoc_row``); targets gone by then are skipped.
    assoc: list[dict[str, Any]]
    #: The journal line (set when queued).
    line: bytes = field(default=b"", repr=False)

    @property
    def pending(self) -> bool:
        """Whether it records co-occurrences (a CoOccursQueue row)."""
        return len(self.cue_ids) >= 2

    def to_line(self) -> bytes:
        """One JSON line (times as ISO text)."""
        row = dict(self.row)
        for key in _ROW_TIMES:
            row[key] = _iso(row[key])
        assoc = [{**a, "ts": _iso(a["ts"])} for a in self.assoc]
        data = {"row": row, "new_cues": self.new_cues, "cue_ids": self.cue_ids, "assoc": assoc}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> MemoryWrite:
        """The inverse of ``to_line`` (ValueError/KeyError/TypeError if damaged)."""
        data = json.loads(line)
        row = {**_ROW_DEFAULTS, **data["row"]}
        for key in _ROW_TIMES:
            row[key] = _from_iso(row[key])
        assoc = [{**a, "ts": _from_iso(a["ts"])} for a in data["assoc"]]
        return cls(row, list(data["new_cues"]), [str(c) for c in data["cue_ids"]], assoc, line)


class MemoryStatements(Protocol):
    """Writes a queued memory's rows (``rows.RowWriter``)."""

    def write_memory(self, conn: Any, memory: MemoryWrite) -> None:
        """The statements of one new memory, in the caller's transaction."""
        ...


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _from_iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class WriteBehind:
    """The journal, the queue of memories not yet in Kùzu, and their background write;
    every other read and write of ``store`` goes through it, after the queue. A queued
    memory's rows are written by ``statements``; its co-occurrences wait in
    ``cooccurs`` until folded."""

    def __init__(
        self, store: GraphStore, statements: MemoryStatements, cooccurs: CoOccurrences
    ) -> None:
        self._store = store
        self._statements = statements
        self._cooccurs = cooccurs
        self._queue_lock = threading.Lock()
        self._queued: list[MemoryWrite] = []
        #: True from taking a batch off the queue until it is committed (or put back).
        self._batch_writing = False
        self._journal: IO[bytes] | None = None
        #: The journal's size up to its last whole line (a failed append is cut back).
        self._journal_end = 0
        #: Whether this open has written the journal's memories to Kùzu (before that,
        #: a checkpoint must not trim the journal).
        self.replayed = False
        self._writer_scheduled = False
        self._writer: ThreadPoolExecutor | None = None

    @property
    def journal_path(self) -> Path:
        """The journal of memories not yet written to Kùzu, next to the database."""
        path = self._store.path
        return path.with_name(path.name + JOURNAL_SUFFIX)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the write and Kùzu locks, with every queued memory written first (for
        a Kùzu write transaction or a DDL statement of this thread)."""
        with self._store.write_lock:
            self.write_queued()
            with self._store.kuzu_lock:
                yield

    # -- Kùzu's reads and writes, after the queue -----------------------------------------
    def query(
        self, query: str, params: dict[str, Any] | None = None, lag_ok: bool = False
    ) -> list[list[Any]]:
        """Run a read query on this thread's connection and return all rows, after the
        queued memories are written (Kùzu must not lag a store that returned). With
        ``lag_ok``, a disk too full to write them does not stop the read (the caller
        adds them from the queue)."""
        try:
            self.write_queued()
        except StorageFullError as exc:
            if not lag_ok:
                raise
            log.warning("kuzu read before the stored memories could be written", error=str(exc))
        store = self._store
        try:
            return store.read(query, params)
        except RuntimeError as exc:
            raise store.kuzu_error(exc, f"{store.engine} query failed on {store.path}") from exc

    def by_offset(
        self,
        pattern: str,
        alias: str,
        returns: str,
        step: int = OFFSET_CHUNK,
        where: str = "",
        params: dict[str, Any] | None = None,
    ) -> Iterator[list[list[Any]]]:
        """Rows of ``MATCH pattern [WHERE where] RETURN returns`` in chunks of ``step``
        node offsets of ``alias`` (every node once: offsets are unique, holes of deleted
        nodes skipped), in no particular order.

        Kùzu materialises a whole result in its buffer pool, whose pages stay resident:
        one query over 100k engrams and their 1M links left ~650 MB there, chunks ~250.
        Keyset pages (``ORDER BY id`` per page) took 40 s over 100k engrams.
        """
        table = pattern.split(f"({alias}:", 1)[1].split(")", 1)[0]
        top = self.query(f"MATCH ({alias}:{table}) RETURN max(offset(id({alias})))")[0][0]
        if top is None:
            return
        chunk = f"offset(id({alias})) >= $lo AND offset(id({alias})) < $hi"
        condition = f"({where}) AND {chunk}" if where else chunk
        statement = f"MATCH {pattern} WHERE {condition} RETURN {returns}"
        for lo in range(0, int(top) + 1, step):
            yield self.query(statement, {**(params or {}), "lo": lo, "hi": lo + step})

    def stream(self, query: str, params: dict[str, Any] | None = None) -> Iterator[list[Any]]:
        """Rows of a read query; fetched eagerly so the caller may query in between."""
        return iter(self.query(query, params))

    @contextmanager
    def write(self) -> Iterator[Any]:
        """One write transaction at a time, after the queued memories; rolled back on
        any error."""
        store = self._store
        with self.exclusive():
            store.check_room(0, "nothing was changed")
            conn = store.conn()
            with store.transaction(conn):
                yield conn
            store.commit(conn)
            self.checkpoint()

    def fold_cooccurrences(self) -> int:
        """Apply every pending memory's co-occurrences to the edges; returns how many."""
        store = self._store
        with store.write_lock:
            self.write_queued()  # queued memories count once written
            if not self._cooccurs.pending:
                return 0
            needed = self._cooccurs.pending * durability.FOLD_BYTES
            store.check_room(needed, "the co-occurrence counts were not brought up to date")
            with store.errors(), self.write() as conn:
                folded = self._cooccurs.fold(conn)
            self._cooccurs.pending = 0
        log.debug("kuzu co-occurrences folded", path=str(store.path), memories=folded)
        return folded

    def queued(self) -> list[MemoryWrite]:
        """The memories stored but not yet written to Kùzu, oldest first."""
        return list(self._queued)

    # -- the queue ------------------------------------------------------------------------
    def enqueue(self, memory: MemoryWrite) -> None:
        """Journal ``memory`` durably and queue it for the background write (the caller
        holds the write lock, has set ``memory.line``, and keeps the memory's id and cues
        after this returns)."""
        with self._queue_lock:
            try:
                journal = self._open_journal()
            except OSError as exc:
                raise self._journal_error(exc, "open") from exc
            self._append(journal, memory.line)
            self._queued.append(memory)
            schedule = not self._writer_scheduled
            self._writer_scheduled = True
        if schedule:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="smriti-kuzu-writer")
            self._writer.submit(self._write_in_background)

    def journal_forgotten(self, ids: Sequence[str]) -> None:
        """Record durably that ``ids`` are being deleted, before Kùzu deletes them, when
        the journal holds lines (the caller holds the write lock). A replay after a
        crash writes the journal's memories that Kùzu lacks: without this line it would
        bring back a memory that was written, then forgotten, and fail on its cues."""
        if not ids or (self._journal is None and _size(self.journal_path) == 0):
            return
        line = json.dumps({FORGOTTEN: list(ids)}, separators=(",", ":")).encode() + b"\n"
        outcome = "nothing was deleted"
        with self._queue_lock:
            try:
                journal = self._open_journal()
            except OSError as exc:
                raise self._journal_error(exc, "open", outcome) from exc
            if self._journal_end:
                self._append(journal, line, outcome)

    def _open_journal(self) -> IO[bytes]:
        if self._journal is None:
            journal = open_private(self.journal_path, "ab", buffering=0)
            self._journal_end = os.fstat(journal.fileno()).st_size
            self._journal = journal
        return self._journal

    def _append(
        self, journal: IO[bytes], line: bytes, outcome: str = "the memory was not stored"
    ) -> None:
        """Write ``line`` whole and fsync it, or cut it back off and raise (the error
        says ``outcome``)."""
        fd = journal.fileno()
        try:
            if os.fstat(fd).st_size != self._journal_end:  # an earlier cut-back failed
                self._cut_back(journal)
            view = memoryview(line)
            while view:  # an unbuffered write may write only part of the line
                written = journal.write(view)
                if not written:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[written:]
            os.fsync(fd)
        except OSError as exc:
            try:
                self._cut_back(journal)
            except OSError as cut:  # retried before the next append; ignored when read
                log.warning("journal not cut back", path=str(self.journal_path), error=str(cut))
            raise self._journal_error(exc, "write", outcome) from exc
        self._journal_end += len(line)

    def _cut_back(self, journal: IO[bytes]) -> None:
        """Drop whatever follows the last whole line (a failed append)."""
        journal.truncate(self._journal_end)
        os.fsync(journal.fileno())

    def _journal_error(
        self, exc: OSError, action: str, outcome: str = "the memory was not stored"
    ) -> BackendError:
        if exc.errno in _FULL:
            return durability.disk_full(self._store.path, outcome)
        return BackendError(f"cannot {action} the journal {self.journal_path}: {exc}; {outcome}")

    def writes_queued(self) -> int:
        """How many stored memories are not yet written to Kùzu."""
        return len(self._queued)

    def write_queued(self) -> None:
        """Write every queued memory to Kùzu now, in one transaction, or wait for the
        background write under way. On failure (StorageFullError when the disk has no
        room for it) the memories stay queued and journaled and BackendError is raised."""
        # Read in this order: a write takes the queue and sets ``_batch_writing`` at once.
        if not self._queued and not self._batch_writing:
            return  # no lock: reads need not wait for other writes (an import, say)
        with self._store.kuzu_lock:
            with self._queue_lock:
                batch, self._queued = self._queued, []
                self._batch_writing = bool(batch)
            if not batch:
                return
            kept = f"{len(batch)} stored memories wait in {self.journal_path.name}"
            needed = 2 * sum(len(m.line) for m in batch)
            # Without room for the fold too, it waits (the pending rows are durable).
            folding = (self._cooccurs.pending + len(batch)) * durability.FOLD_BYTES
            fold = durability.has_room(self._store.path, durability.KUZU_RESERVE + needed + folding)
            try:
                self._store.check_room(needed, kept)
                folded = self._write_batch(self._store.conn(), batch, fold=fold)
            except BaseException as exc:
                with self._queue_lock:
                    self._queued[:0] = batch
                    self._batch_writing = False
                if isinstance(exc, RuntimeError):
                    what = f"Kùzu write failed on {self._store.path}; {kept}"
                    raise self._store.kuzu_error(exc, what) from exc
                raise
            self._cooccurs.pending = (
                0 if folded else self._cooccurs.pending + sum(m.pending for m in batch)
            )
            with self._queue_lock:
                self._batch_writing = False
            self.checkpoint()

    def _write_batch(self, conn: Any, batch: list[MemoryWrite], fold: bool) -> bool:
        """Write ``batch`` in one transaction; with ``fold``, fold the co-occurrences in
        it too once enough memories wait (``FOLD_PENDING``). Returns whether it folded."""
        with self._store.transaction(conn):
            for memory in batch:
                self._statements.write_memory(conn, memory)
            pending = self._cooccurs.pending + sum(m.pending for m in batch)
            folded = fold and pending >= cooccurs.FOLD_PENDING
            if folded:
                self._cooccurs.fold(conn, (c["id"] for m in batch for c in m.new_cues))
        self._store.commit(conn)
        return folded

    def checkpoint(self, force: bool = False) -> bool:
        """Checkpoint Kùzu once its WAL or the journal is large (always with ``force``)
        and the disk has room for it; then trim the journal to the queued memories and
        raise the manifest. Returns whether it checkpointed."""
        wal = _size(self._store.path.with_name(self._store.path.name + ".wal"))
        large = wal >= durability.CHECKPOINT_WAL_BYTES
        if not (force or large or self._journal_end >= JOURNAL_CHECKPOINT_BYTES):
            return False
        if not durability.has_room(self._store.path, durability.checkpoint_room(wal)):
            log.warning(
                "kuzu checkpoint postponed: the disk is nearly full", path=str(self._store.path)
            )
            return False
        with self._store.kuzu_lock:  # held while trimming: no batch is in flight meanwhile
            try:
                conn = self._store.conn()
                with self._store.quiet.exclusive():  # see GraphStore.quiet
                    conn.execute("CHECKPOINT")
            except RuntimeError as exc:  # harmless in Kùzu 0.11.3 (durability)
                log.warning(
                    "kuzu checkpoint failed; retried later",
                    path=str(self._store.path),
                    error=str(exc),
                )
                return False
            if self.replayed:  # else the journal holds memories Kùzu may lack
                with self._queue_lock:
                    self._trim_journal()
        self._store.save_manifest()
        return True

    def _trim_journal(self) -> None:
        """After a checkpoint: keep only the queued memories in the journal."""
        path = self.journal_path
        try:
            if not self._queued:
                if path.exists():
                    with open(path, "r+b") as journal:
                        journal.truncate(0)
                        os.fsync(journal.fileno())
                self._journal_end = 0
                return
            scratch = path.with_name(path.name + ".new")
            with open_private(scratch, "wb") as out:
                for memory in self._queued:
                    out.write(memory.line)
                out.flush()
                os.fsync(out.fileno())
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            os.replace(scratch, path)
        except OSError as exc:  # the journal then holds more than needed, nothing less
            log.warning("kuzu journal not trimmed", path=str(path), error=str(exc))

    def _write_in_background(self) -> None:
        with self._queue_lock:
            self._writer_scheduled = False
        try:
            self.write_queued()
        except Exception as exc:  # retried by the next write or read; kept in the journal
            log.error(
                "memories not yet written to Kùzu", path=str(self._store.path), error=str(exc)
            )

    # -- open and close -------------------------------------------------------------------
    def replay_journal(self) -> int:
        """Write the journal's memories that Kùzu lacks (after a crash); returns how
        many. Called at open, before the cues and engram ids are loaded."""
        path = self.journal_path
        if not path.exists():
            self.replayed = True
            return 0
        memories, forgotten = _read_journal(path)
        missing: list[MemoryWrite] = []
        if memories:
            ids = [m.row["id"] for m in memories]
            query = "MATCH (e:Engram) WHERE e.id IN $ids RETURN e.id"
            present = {r[0] for r in self.query(query, {"ids": ids})} | forgotten
            missing = [m for m in memories if m.row["id"] not in present]
            if missing:
                with self.exclusive():
                    what = (
                        f"cannot write the {len(missing)} memories of {path} to {self._store.path}"
                    )
                    try:
                        self._store.check_room(2 * sum(len(m.line) for m in missing), what)
                        self._write_batch(self._store.conn(), missing, fold=False)
                    except RuntimeError as exc:
                        raise self._store.kuzu_error(exc, f"{what}; both files were kept") from exc
                log.warning(
                    "kuzu journal replayed: memories stored before a crash written now",
                    path=str(self._store.path),
                    memories=len(missing),
                )
        self.replayed = True
        if memories:
            self.checkpoint(force=True)  # the journal is emptied once Kùzu has them
        return len(missing)

    def stop_writing(self) -> None:
        """At close: write what is queued (or leave it journaled), stop the thread."""
        try:
            self.write_queued()
        except Exception as exc:  # written at the next open, from the journal
            log.error(
                "stored memories left in the journal for the next open",
                path=str(self._store.path),
                error=str(exc),
            )
        with self._queue_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)

    def forget_queue(self) -> None:
        """After the database is closed: drop the queue (what it held stays journaled)."""
        with self._queue_lock:
            self._queued = []
            self._batch_writing = False
            self._writer_scheduled = False
            if self._journal is not None:
                self._journal.close()
                self._journal = None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read_journal(path: Path) -> tuple[list[MemoryWrite], set[str]]:
    """The journal's memories, and the ids forgotten after their last line
    (``_journal_forgotten``); a damaged last line (a store cut short) is dropped."""
    lines = path.read_bytes().split(b"\n")
    memories: list[MemoryWrite] = []
    forgotten: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            if line.startswith(b'{"' + FORGOTTEN.encode() + b'"'):
                forgotten.update(str(i) for i in json.loads(line)[FORGOTTEN])
                continue
            memory = MemoryWrite.from_line(line + b"\n")
            memories.append(memory)
            forgotten.discard(memory.row["id"])  # stored again under its id after that
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines):  # no newline after it: the append never finished
                log.warning("kuzu journal: an unfinished last line ignored", path=str(path))
                continue
            raise BackendError(
                f"line {number} of the journal {path} is damaged ({exc}); the store was left "
                "untouched. Move the journal aside to open the store without the memories "
                "it holds"
            ) from None
    return memories, forgotten
