"""New memories written to Kùzu after the store returns, from a durable journal.

With the caches on (the mirror answers every read of engrams, cues and edges), a store
does not wait for Kùzu. Under the backend's write lock it appends the memory's rows to
a journal file next to the database (``memory.kuzu.journal``, one JSON line, fsynced:
about 0.3 ms), updates the caches and returns. A background thread then writes every
queued memory in one Kùzu transaction, and empties the journal once nothing is queued.
At 100k memories, the statements and the commit were 6-7 ms of a 9-10 ms store.

Kùzu never lags behind what a caller saw: every query of the store itself (``_q``:
listing, statistics, export, backup) and every other write (``_write``: updates,
deletes, imports, folding co-occurrences) first writes what is queued, in order. A
crash or kill before the background write loses nothing: the next open writes the
journal's memories that Kùzu does not have, before anything else. A journal line cut
short by a crash is a store that never returned, and is ignored.

Locks, always taken in this order: the write lock (one logical writer: a store's
enqueue, an update, a delete), then the Kùzu lock (one Kùzu write transaction at a
time: the background write holds only this one, so stores need not wait for it), then
the queue lock (the queue and the journal file).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from smriti.errors import BackendError
from smriti.logs import get_logger
from smriti_backend_kuzu import cooccurs

if TYPE_CHECKING:
    from smriti_backend_kuzu.backend import KuzuBackend as _Self
else:
    _Self = object

log = get_logger(__name__)

JOURNAL_SUFFIX = ".journal"
#: Rewrite the journal with only the queued memories once it is this large and never
#: empty when a write finishes (a steady stream of stores).
JOURNAL_REWRITE_BYTES = 8 * 2**20
#: The row fields that hold times (naive UTC datetimes for Kùzu, ISO text in the journal).
_ROW_TIMES = ("created_at", "last_accessed_at")


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
        row = dict(data["row"])
        for key in _ROW_TIMES:
            row[key] = _from_iso(row[key])
        assoc = [{**a, "ts": _from_iso(a["ts"])} for a in data["assoc"]]
        return cls(row, list(data["new_cues"]), [str(c) for c in data["cue_ids"]], assoc, line)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _from_iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class WriteBehindMixin(_Self):  # type: ignore[misc,valid-type]
    """The journal, the queue of memories not yet in Kùzu, and their background write."""

    def _init_write_behind(self) -> None:
        self._kuzu_lock = threading.RLock()
        self._queue_lock = threading.Lock()
        self._queued: list[MemoryWrite] = []
        #: True from taking a batch off the queue until it is committed (or put back).
        self._batch_writing = False
        self._journal: IO[bytes] | None = None
        self._writer_scheduled = False
        self._writer: ThreadPoolExecutor | None = None

    @property
    def journal_path(self) -> Path:
        """The journal of memories not yet written to Kùzu, next to the database."""
        return self.path.with_name(self.path.name + JOURNAL_SUFFIX)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the write and Kùzu locks, with every queued memory written first (for
        a Kùzu write transaction or a DDL statement of this thread)."""
        with self._write_lock:
            self.write_queued()
            with self._kuzu_lock:
                yield

    # -- the queue ------------------------------------------------------------------------
    def _enqueue(self, memory: MemoryWrite) -> None:
        """Journal ``memory`` durably and queue it for the background write (the caller
        holds the write lock and updates the caches after this returns)."""
        memory.line = memory.to_line()
        with self._queue_lock:
            try:
                journal = self._open_journal()
            except OSError as exc:
                raise BackendError(
                    f"cannot open the journal {self.journal_path}: {exc}; nothing was stored"
                ) from exc
            size = os.fstat(journal.fileno()).st_size
            try:
                journal.write(memory.line)
                os.fsync(journal.fileno())
            except OSError as exc:
                self._cut_journal_back(journal, size)
                raise BackendError(
                    f"cannot write the journal {self.journal_path}: {exc}; nothing was stored"
                ) from exc
            self._queued.append(memory)
            schedule = not self._writer_scheduled
            self._writer_scheduled = True
        if schedule:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="smriti-kuzu-writer")
            self._writer.submit(self._write_in_background)

    def _open_journal(self) -> IO[bytes]:
        if self._journal is None:
            self._journal = open(self.journal_path, "ab", buffering=0)  # noqa: SIM115
        return self._journal

    def _cut_journal_back(self, journal: IO[bytes], size: int) -> None:
        """After a failed append: drop the partial line."""
        try:
            journal.truncate(size)
        except OSError as exc:  # the partial line is ignored when the journal is read
            log.warning("journal not cut back", path=str(self.journal_path), error=str(exc))

    def writes_queued(self) -> int:
        """How many stored memories are not yet written to Kùzu."""
        return len(self._queued)

    def write_queued(self) -> None:
        """Write every queued memory to Kùzu now, in one transaction, or wait for the
        background write under way. On failure the memories stay queued (and
        journaled) and BackendError is raised."""
        # Read in this order: a write takes the queue and sets ``_batch_writing`` at once.
        if not self._queued and not self._batch_writing:
            return  # no lock: reads need not wait for other writes (an import, say)
        with self._kuzu_lock:
            with self._queue_lock:
                batch, self._queued = self._queued, []
                self._batch_writing = bool(batch)
            if not batch:
                return
            try:
                folded = self._write_batch(self._conn(), batch, fold=True)
            except BaseException as exc:
                with self._queue_lock:
                    self._queued[:0] = batch
                    self._batch_writing = False
                if isinstance(exc, RuntimeError):
                    raise BackendError(
                        f"Kùzu write of {len(batch)} stored memories failed on {self.path} "
                        f"(they stay in {self.journal_path.name}): {exc}"
                    ) from exc
                raise
            self._pending = 0 if folded else self._pending + sum(m.pending for m in batch)
            with self._queue_lock:
                self._batch_writing = False
                self._trim_journal()

    def _write_batch(self, conn: Any, batch: list[MemoryWrite], fold: bool) -> bool:
        """Write ``batch`` in one transaction; with ``fold``, fold the co-occurrences in
        it too once enough memories wait (``FOLD_PENDING``). Returns whether it folded."""
        with self._transaction(conn):
            for memory in batch:
                self._write_memory(conn, memory)
            pending = self._pending + sum(m.pending for m in batch)
            folded = fold and pending >= cooccurs.FOLD_PENDING
            if folded:
                self._fold(conn, (c["id"] for m in batch for c in m.new_cues))
        self._commit(conn)
        return folded

    def _trim_journal(self) -> None:
        """Empty the journal when nothing is queued; rewrite it when it grew large."""
        journal = self._journal
        if journal is None:
            return
        if not self._queued:
            journal.truncate(0)
            return
        if os.fstat(journal.fileno()).st_size < JOURNAL_REWRITE_BYTES:
            return
        scratch = self.journal_path.with_name(self.journal_path.name + ".new")
        with open(scratch, "wb") as out:
            for memory in self._queued:
                out.write(memory.line)
            out.flush()
            os.fsync(out.fileno())
        journal.close()
        os.replace(scratch, self.journal_path)
        self._journal = None

    def _write_in_background(self) -> None:
        with self._queue_lock:
            self._writer_scheduled = False
        try:
            self.write_queued()
        except Exception as exc:  # retried by the next write or read; kept in the journal
            log.error("memories not yet written to Kùzu", path=str(self.path), error=str(exc))

    # -- open and close -------------------------------------------------------------------
    def _replay_journal(self) -> int:
        """Write the journal's memories that Kùzu lacks (after a crash); returns how
        many. Called at open, before the caches are loaded."""
        path = self.journal_path
        if not path.exists():
            return 0
        memories = _read_journal(path)
        if memories:
            ids = [m.row["id"] for m in memories]
            query = "MATCH (e:Engram) WHERE e.id IN $ids RETURN e.id"
            present = {r[0] for r in self._q(query, {"ids": ids})}
            missing = [m for m in memories if m.row["id"] not in present]
            if missing:
                with self._exclusive():
                    try:
                        self._write_batch(self._conn(), missing, fold=False)
                    except RuntimeError as exc:
                        raise BackendError(
                            f"cannot write the {len(missing)} memories of {path} to {self.path}: "
                            f"{exc}. Both files were left untouched"
                        ) from exc
                log.warning(
                    "kuzu journal replayed: memories stored before a crash written now",
                    path=str(self.path),
                    memories=len(missing),
                )
            memories = missing
        with open(path, "r+b") as journal:
            journal.truncate(0)
            os.fsync(journal.fileno())
        return len(memories)

    def _stop_writing(self) -> None:
        """At close: write what is queued (or leave it journaled), stop the thread."""
        try:
            self.write_queued()
        except Exception as exc:  # written at the next open, from the journal
            log.error(
                "stored memories left in the journal for the next open",
                path=str(self.path),
                error=str(exc),
            )
        with self._queue_lock:
            writer, self._writer = self._writer, None
            self._queued = []
            self._batch_writing = False
            self._writer_scheduled = False
            if self._journal is not None:
                self._journal.close()
                self._journal = None
        if writer is not None:
            writer.shutdown(wait=True)


def _read_journal(path: Path) -> list[MemoryWrite]:
    """The journal's memories; a damaged last line (a store cut short) is dropped."""
    lines = path.read_bytes().split(b"\n")
    memories: list[MemoryWrite] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            memories.append(MemoryWrite.from_line(line + b"\n"))
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines):  # no newline after it: the append never finished
                log.warning("kuzu journal: an unfinished last line ignored", path=str(path))
                continue
            raise BackendError(
                f"line {number} of the journal {path} is damaged ({exc}); the store was left "
                "untouched. Move the journal aside to open the store without the memories "
                "it holds"
            ) from None
    return memories
