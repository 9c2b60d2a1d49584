"""``IndexedBackend``: a sole-writer backend whose reads a working set answers.

The engine wraps a backend in it when the backend is the only writer of its store
(``StorageBackend.sole_writer``, or ``SMRITI_WORKING_SET=on``). The backend keeps
persistence; the working set (``smriti.index.working_set``) answers recall's reads.

- **Loading** happens on a background thread after ``open``, so a server answers at
  once. A read that arrives while the working set loads from its snapshot waits for it
  (seconds); while it loads from the store itself, reads go to the backend's own
  (native) path. Writes made meanwhile are recorded and replayed onto the loaded set: every
  change is an absolute value or a removal, so replaying one the load already saw
  changes nothing.
- **Writes** go to the backend first; only once it has committed are they applied to
  the working set, so nothing is readable that is not stored.
- **Access strengthening** (recall's access count, time and decay) is applied to the
  working set at once and written to the backend shortly after on a background thread,
  in one batch for a burst of recalls. Every read the backend answers, every other
  write and ``close`` write it first; a crash in between loses only those access
  updates, never a memory.
- **Snapshot**: for a store nothing else can open, the working set is saved at close,
  and after ``IDLE_SAVE_SECONDS`` without a write, and loaded at the next open when the
  store still holds the stamp it was saved with (``smriti.index.snapshot``): a start
  reads arrays instead of the whole database, also after a process that was killed
  while idle. Before the first write after a save, the store's stamp is replaced by
  ``DIRTY``, so a snapshot that misses a write is never used.
- **Budget**: a working set that would not fit in ``SMRITI_WORKING_SET_MB`` (shared by
  every working set of the process, least recently used evicted first) is not loaded,
  and a warning says so; reads then stay on the native path.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from smriti import get_logger
from smriti.backend import (
    Association,
    CoOccurrence,
    Cue,
    Engram,
    EngramStats,
    EngramUpdate,
    Expand,
    Link,
    Listing,
    Neighbourhood,
    Seeds,
    Seek,
    StorageBackend,
    StoredMemory,
    joined,
    utcnow,
)
from smriti.index import heap, snapshot
from smriti.index.budget import BUDGET
from smriti.index.working_set import UPDATED, WorkingSet

log = get_logger(__name__)

#: Seconds a burst of access strengthening is gathered before it is written.
STRENGTHEN_DELAY = 0.2
#: Bytes per engram assumed before loading (rows and vectors only: a lower bound).
ROW_BYTES = 900
#: Longest a read waits for a working set loading from its snapshot (which takes seconds
#: where the backend's own reads of a large store can take much longer).
SNAPSHOT_WAIT = 60.0
#: Seconds without a write after which a changed working set is saved again, so that a
#: process that dies later (killed, out of memory, the machine stopping) leaves a
#: snapshot that the next start can use.
IDLE_SAVE_SECONDS = 60.0


class _Stopped(Exception):
    """The backend closed while its working set was loading."""


class IndexedBackend(StorageBackend):
    """Wraps ``inner``; see the module docstring. Unknown attributes are ``inner``'s."""

    name = "indexed"

    def __init__(
        self,
        inner: StorageBackend,
        budget_mb: int,
        background: bool = True,
        snapshot_dir: Path | None = None,
        idle_save: float = IDLE_SAVE_SECONDS,
    ) -> None:
        """``snapshot_dir``: where the working set is saved (at close, and after
        ``idle_save`` seconds without a write) and loaded from at the next open
        (``smriti.index.snapshot``); None keeps no snapshot."""
        super().__init__(inner.user)
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.multi_tenant = inner.multi_tenant
        # A class attribute of the base class, which __getattr__ would never reach: the
        # doctor and the owner ask the chosen backend whether it needs an owner process.
        self.single_process = inner.single_process  # type: ignore[misc]
        self.sole_writer = True
        self.budget_bytes = int(budget_mb) * 2**20
        self.background = background
        #: Guards the working set's state and the changes recorded while it loads.
        self._lock = threading.RLock()
        self._ws: WorkingSet | None = None
        self.state = "cold"  # cold | loading | ready | over budget | failed
        self._pending: list[Callable[[WorkingSet], None]] | None = None
        self._loader: threading.Thread | None = None
        self._closing = threading.Event()
        #: Set once a load from a snapshot has finished or failed (reads wait for it).
        self._settled = threading.Event()
        self._queued: dict[str, EngramUpdate] = {}
        self._queue_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._flusher: threading.Thread | None = None
        self.snapshot_dir = snapshot_dir
        self.idle_save = idle_save
        #: Whether the snapshot matches the store as it was opened.
        self._snapshot_valid = False
        #: Guards the stamp bookkeeping: whether the store holds the stamp of the
        #: snapshot on disk (nothing written since), writes under way, and a counter
        #: of write starts and ends that tells a save whether one happened meanwhile.
        self._stamp_lock = threading.Lock()
        self._clean = False
        self._in_flight = 0
        self._generation = 0
        self._last_write = time.monotonic()
        self._saver: threading.Thread | None = None
        #: Held while the snapshot's files are written or removed (``erase_deleted``).
        self._snapshot_lock = threading.Lock()
        self._preload: _Preload | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    @classmethod
    def from_options(cls, options: Any) -> StorageBackend:  # pragma: no cover
        raise TypeError("IndexedBackend wraps a backend: use smriti.index.wrap")

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Open the backend, then load the working set (in the background if so made).

        A snapshot on disk starts loading while the backend opens (both take a second
        or so at 100,000 memories); it is used only if the store then holds its stamp."""
        self._preload = _Preload(self.snapshot_dir) if self.background else None
        try:
            self.inner.open()
        except BaseException:
            self._preload = None
            raise
        self._closing.clear()
        self._check_snapshot()
        self._flusher = threading.Thread(
            target=self._flush_in_background, name="smriti-strengthen", daemon=True
        )
        self._flusher.start()
        if self.snapshot_dir is not None:
            self._saver = threading.Thread(
                target=self._save_when_idle, name="smriti-snapshot", daemon=True
            )
            self._saver.start()
        if self.background:
            self._start_loading()
        else:
            self._begin()
            self._load()

    def close(self) -> None:
        """Stop loading, write queued strengthening, close the backend; idempotent."""
        self._closing.set()
        self._wake.set()
        loader, self._loader = self._loader, None
        if loader is not None:
            loader.join()
        for thread in (self._flusher, self._saver):
            if thread is not None:
                thread.join()
        self._flusher = self._saver = None
        try:
            self.flush_strengthening()
        except Exception as exc:  # closing must not fail; only access updates are lost
            log.error("access strengthening not saved", user=self.user, error=str(exc))
        self._save_snapshot()
        with self._lock:
            self._ws, self._pending, self.state = None, None, "cold"
        BUDGET.release(self)
        self.inner.close()

    def needs_reopen(self) -> bool:
        return self.inner.needs_reopen()

    def evict(self) -> None:
        """Drop the working set (the budget needs the room); reads go to the backend."""
        with self._lock:
            if self._ws is None:
                return
            self._ws, self.state = None, "cold"
        BUDGET.release(self)
        log.info("working set evicted to stay within the budget", user=self.user)

    def working_set_status(self) -> dict[str, Any]:
        """For ``stats`` and ``doctor``: the state, size and memory of the working set."""
        ws = self._ws
        status: dict[str, Any] = {"state": self.state, "budget_mb": self.budget_bytes >> 20}
        if ws is not None:
            status.update(engrams=len(ws), mb=round(ws.nbytes() / 2**20, 1))
        return status

    # -- snapshots ----------------------------------------------------------------------
    def _check_snapshot(self) -> None:
        """Trust the snapshot if the store holds its stamp and its engram count; then mark
        the store as changed since any snapshot, before anything is written to it."""
        self._snapshot_valid = self._clean = False
        if self.snapshot_dir is None:
            return
        held = self.inner.get_meta(snapshot.STAMP_KEY)
        if not held or held == snapshot.DIRTY:
            return
        saved = snapshot.stamp_of(self.snapshot_dir)
        self._snapshot_valid = self._clean = saved == held and (
            snapshot.engrams_of(self.snapshot_dir) == self.inner.count_engrams()
        )
        if not self._snapshot_valid:
            self.inner.set_meta(snapshot.STAMP_KEY, snapshot.DIRTY)  # a stale stamp
            snapshot.mark_stale(self.snapshot_dir)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Around every write to the backend and its working set: the snapshot's stamp
        is replaced by ``DIRTY`` first, and a save under way learns of the write."""
        with self._stamp_lock:
            if self._clean:
                self.inner.set_meta(snapshot.STAMP_KEY, snapshot.DIRTY)
                self._clean = False
                if self.snapshot_dir is not None:
                    snapshot.mark_stale(self.snapshot_dir)
            self._in_flight += 1
            self._generation += 1
        try:
            yield
        finally:
            with self._stamp_lock:
                self._in_flight -= 1
                self._generation += 1
                self._last_write = time.monotonic()

    def _save_when_idle(self) -> None:
        while not self._closing.wait(min(self.idle_save, 5.0)):
            with self._stamp_lock:
                idle = time.monotonic() - self._last_write >= self.idle_save
                due = idle and not self._clean and not self._in_flight
            if due and self._ws is not None:
                self._save_snapshot()

    def _save_snapshot(self) -> None:
        """Save the working set (when loaded and changed since its snapshot) and record
        its stamp in the store, unless a write came in meanwhile."""
        ws = self._ws
        if self.snapshot_dir is None or ws is None:
            return
        with self._stamp_lock:
            if self._clean or self._in_flight:
                return
            generation = self._generation
        began, stamp = time.monotonic(), uuid.uuid4().hex
        try:
            with self._snapshot_lock:  # not while an erase removes the files
                snapshot.save(ws, self.snapshot_dir, stamp)
            with self._stamp_lock:
                if self._generation != generation or self._in_flight:
                    return  # the files miss a write: the stamp stays DIRTY
                self.inner.set_meta(snapshot.STAMP_KEY, stamp)
                self._clean = True
        except Exception as exc:  # only the next start is slower
            log.warning("working set not saved; the next start rebuilds it from the store",
                        user=self.user, error=f"{type(exc).__name__}: {exc}")  # fmt: skip
            return
        finally:
            heap.release()
        log.info("working set saved", user=self.user, engrams=len(ws),
                 seconds=round(time.monotonic() - began, 2))  # fmt: skip

    def _from_snapshot(self) -> WorkingSet | None:
        """The saved working set when it matches the store, else None."""
        preload, self._preload = self._preload, None
        if not self._snapshot_valid or self.snapshot_dir is None:
            return None
        try:
            return preload.result() if preload is not None else snapshot.load(self.snapshot_dir)
        except Exception as exc:
            self._snapshot_valid = self._clean = False  # saved again from the store's
            self._settled.set()  # readers waiting for the snapshot go to the backend
            log.warning("working set snapshot unreadable; rebuilding it from the store",
                        user=self.user, error=f"{type(exc).__name__}: {exc}")  # fmt: skip
            return None

    # -- loading ------------------------------------------------------------------------
    def _begin(self) -> bool:
        """Mark a load as started (recording changes from now); False if one runs."""
        with self._lock:
            if self.state not in ("cold", "failed") or self._closing.is_set():
                return False
            self.state, self._pending = "loading", []
            self._settled.clear()
            return True

    def _start_loading(self) -> None:
        if not self._begin():
            return
        self._loader = threading.Thread(target=self._load, name="smriti-index", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        try:
            self._load_once()
        finally:
            self._preload = None  # unused when over budget or failed: let it go
            self._settled.set()

    def _load_once(self) -> None:
        began = time.monotonic()
        try:
            count = self.inner.count_engrams()
            if count * ROW_BYTES > self.budget_bytes:
                self._over_budget(count * ROW_BYTES, count)
                return
            ws = self._from_snapshot()
            source = "snapshot"
            if ws is None:
                ws, source = WorkingSet(capacity=count + count // 16 + 64), "store"
                cues, engrams, links, associations = self.inner.working_set_streams()
                ws.load(*(self._until_closed(s) for s in (cues, engrams, links, associations)))
        except _Stopped:
            return
        except Exception as exc:
            with self._lock:
                self.state, self._pending = "failed", None
            log.error(
                "working set not loaded; reads use the backend's own queries",
                user=self.user, error=f"{type(exc).__name__}: {exc}",
            )  # fmt: skip
            return
        nbytes = ws.nbytes()
        if not BUDGET.admit(self, nbytes, self.budget_bytes):
            self._over_budget(nbytes, len(ws))
            return
        with self._lock:
            for change in self._pending or ():
                change(ws)
            self._ws, self._pending, self.state = ws, None, "ready"
        heap.release()
        log.info(
            "working set loaded", user=self.user, engrams=len(ws), source=source,
            mb=round(nbytes / 2**20, 1), seconds=round(time.monotonic() - began, 2),
        )  # fmt: skip

    def _over_budget(self, nbytes: int, count: int) -> None:
        with self._lock:
            self.state, self._pending = "over budget", None
        log.warning(
            "the working set does not fit in SMRITI_WORKING_SET_MB: recall uses the "
            "backend's own queries, which are slower; raise the budget to keep it in memory",
            user=self.user, engrams=count, needed_mb=round(nbytes / 2**20, 1),
            budget_mb=self.budget_bytes >> 20,
        )  # fmt: skip

    def _until_closed[T](self, items: Iterable[T]) -> Iterator[T]:
        for n, item in enumerate(items):
            if n % 1000 == 0 and self._closing.is_set():
                raise _Stopped
            yield item

    def _reader(self) -> WorkingSet | None:
        """The working set when it is ready (else None: ask the backend). While it loads
        from a snapshot, reads wait for it."""
        ws = self._ws
        if ws is not None:
            BUDGET.touch(self)
        elif self.state == "cold" and self.background:
            self._start_loading()  # evicted earlier: load again
        elif self.state == "loading" and self._snapshot_valid:
            self._settled.wait(SNAPSHOT_WAIT)
            ws = self._ws
        return ws

    def _native(self) -> StorageBackend:
        """The backend, with the strengthening queued so far written to it."""
        self.flush_strengthening()
        return self.inner

    def _apply(self, change: Callable[[WorkingSet], None]) -> None:
        """Apply a committed change to the working set, or record it while it loads."""
        with self._lock:
            if self._ws is not None:
                change(self._ws)
            elif self._pending is not None:
                self._pending.append(change)

    # -- strengthening -------------------------------------------------------------------
    def flush_strengthening(self) -> None:
        """Write the queued access strengthening to the backend now."""
        with self._flush_lock:
            with self._queue_lock:
                batch, self._queued = list(self._queued.values()), {}
            if batch:
                with self._writing():
                    self.inner.strengthen_engrams(batch)

    def _flush_in_background(self) -> None:
        while not self._closing.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._closing.wait(STRENGTHEN_DELAY):
                return
            try:
                self.flush_strengthening()
            except Exception as exc:  # best effort: the values are in the working set
                log.warning("access strengthening not saved", user=self.user, error=str(exc))

    # -- metadata and indexes -------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        return self.inner.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self.inner.set_meta(key, value)

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        return self.inner.ensure_indexes(dims, min_engrams)

    # -- writes -----------------------------------------------------------------------------
    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        edges = _dated(associations)
        with self._writing():
            stored = self.inner.add_memory(engram, cues, edges)
            self._apply(lambda ws: ws.put_memory(stored, edges))
        return stored

    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        self.flush_strengthening()  # an older strengthening must not overwrite these
        batch = list(updates)
        with self._writing():
            self.inner.update_engrams(batch)
            self._apply(lambda ws: ws.update(batch))

    def strengthen_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        batch = list(updates)
        with self._lock:
            ws = self._ws
            if ws is not None:
                ws.update(batch)
        if ws is None:
            with self._writing():
                self.inner.strengthen_engrams(batch)
                self._apply(lambda w: w.update(batch))
            return
        with self._queue_lock:
            for u in batch:
                self._queued[u.id] = _merged(self._queued.get(u.id), u)
        self._wake.set()

    def delete_engrams(self, ids: Sequence[str]) -> int:
        self.flush_strengthening()
        doomed = list(ids)
        with self._writing():
            deleted = self.inner.delete_engrams(doomed)
            self._apply(lambda ws: ws.remove_engrams(doomed))
        return deleted

    def delete_orphan_cues(self) -> int:
        with self._writing():
            deleted = self.inner.delete_orphan_cues()
            self._apply(lambda ws: ws.remove_orphan_cues())
        return deleted

    def erase_deleted(self) -> int:
        """The snapshot on disk may hold deleted memories: it is removed (the next
        close, or an idle pause, saves the working set again), then the backend erases
        and the working set drops the same orphaned cues."""
        with self._writing():
            with self._snapshot_lock:
                if self.snapshot_dir is not None and self.snapshot_dir.exists():
                    shutil.rmtree(self.snapshot_dir)
            dropped = self.inner.erase_deleted()
            self._apply(lambda ws: ws.remove_orphan_cues())
        return dropped

    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        self.flush_strengthening()
        a = _dated(associations)
        e, c, lk = list(engrams), list(cues), list(links)
        with self._writing():
            self.inner.import_records(e, c, lk, a, cooccurrences)
            self._apply(lambda ws: ws.put_records(e, c, lk, a))

    # -- reads ------------------------------------------------------------------------------
    def seek(self, query: Seek) -> Seeds:
        ws = self._reader()
        return ws.seek(query) if ws is not None else self._native().seek(query)

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        ws = self._reader()
        return ws.neighbourhood(query) if ws is not None else self._native().neighbourhood(query)

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        ws = self._reader()
        if ws is not None:
            return ws.vector_search_above(embedding, k, min_score)
        return self._native().vector_search_above(embedding, k, min_score)

    def nearest_engrams(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[Engram, float]]:
        ws = self._reader()
        if ws is None:  # the backend's own one-round-trip read, if it has one
            return self._native().nearest_engrams(embedding, k, min_score)
        hits = ws.vector_search_above(embedding, k, min_score)
        return joined(hits, ws.get_engrams([i for i, _ in hits], embeddings=False))

    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        ws = self._reader()
        if ws is not None:
            return ws.get_engrams(ids, embeddings)
        return self._native().get_engrams(ids, embeddings)

    def list_page(self, listing: Listing) -> list[Engram]:
        ws = self._reader()
        return ws.list_page(listing) if ws is not None else self._native().list_page(listing)

    def count_engrams(self) -> int:
        ws = self._reader()
        return len(ws) if ws is not None else self.inner.count_engrams()

    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        ws = self._reader()
        return ws.get_cues(names) if ws is not None else self.inner.get_cues(names)

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        ws = self._reader()
        return ws.get_cues_by_id(ids) if ws is not None else self.inner.get_cues_by_id(ids)

    def engram_stats(self) -> Iterator[EngramStats]:
        ws = self._reader()
        return ws.engram_stats() if ws is not None else self._native().engram_stats()

    def counts(self) -> dict[str, int]:
        return self._native().counts()

    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        return self._native().iter_engrams(batch_size)

    def iter_cues(self) -> Iterator[Cue]:
        return self._native().iter_cues()

    def iter_links(self) -> Iterator[Link]:
        return self._native().iter_links()

    def iter_associations(self) -> Iterator[Association]:
        ws = self._reader()
        return ws.iter_associations() if ws is not None else self._native().iter_associations()

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        return self._native().iter_cooccurrences()


class _Preload:
    """A snapshot loading on a thread of its own (nothing when there is none)."""

    def __init__(self, directory: Path | None) -> None:
        self._ws: WorkingSet | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if directory is not None and snapshot.stamp_of(directory) is not None:
            self._thread = threading.Thread(
                target=self._run, args=(directory,), name="smriti-preload", daemon=True
            )
            self._thread.start()

    def _run(self, directory: Path) -> None:
        try:
            self._ws = snapshot.load(directory)
        except BaseException as exc:  # raised again by result()
            self._error = exc

    def result(self) -> WorkingSet:
        """The loaded working set (raises what loading raised)."""
        if self._thread is None:
            raise FileNotFoundError("no snapshot to load")
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._ws is not None
        return self._ws


def _merged(older: EngramUpdate | None, newer: EngramUpdate) -> EngramUpdate:
    """One update doing what ``older`` then ``newer`` do: a queued update replaced by a
    later one for the same memory must not lose the fields only the older one set."""
    if older is None:
        return newer
    changes = {f: getattr(newer, f) for f in UPDATED if getattr(newer, f) is not None}
    return replace(older, **changes)


def _dated(edges: Sequence[Association]) -> list[Association]:
    """``edges`` with a creation time each (now, for those without), so the backend and
    the working set record the same one."""
    now = utcnow()
    return [a if a.created_at is not None else replace(a, created_at=now) for a in edges]
