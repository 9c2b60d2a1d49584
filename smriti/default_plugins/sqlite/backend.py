"""The reference storage backend: one SQLite file per user, standard library only.

The store lives at ``{STORAGE_LOCATION}/{user}/smriti.sqlite3``: users are isolated by
file, and the user name is validated before it becomes part of a path. The file is in
WAL mode with ``synchronous=FULL``, so a write acknowledged by a method is on disk, and
each write method is one ``BEGIN IMMEDIATE`` transaction: all of it or nothing.

Each thread has its own connection. Reads that take several statements run in one
read transaction (a consistent snapshot) and never wait for a writer; writes of this
process are serialised by a lock, and those of other processes by SQLite's file lock,
so several processes may open the same store. Searches are computed in Python: exact
cosine over in-process vector tables (``vectors``) and BM25 over a postings table
(``lexical``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from smriti.backend import StorageBackend
from smriti.config import validate_user
from smriti.default_plugins.sqlite import schema
from smriti.default_plugins.sqlite.reads import ReadsMixin
from smriti.default_plugins.sqlite.vectors import VectorTable
from smriti.default_plugins.sqlite.writes import WritesMixin
from smriti.errors import BackendError, StorageFullError, StoreLockedError
from smriti.logs import get_logger
from smriti.private import private_dir

if TYPE_CHECKING:
    from smriti.config import Settings

log = get_logger(__name__)

DB_FILE = "smriti.sqlite3"


class SqliteBackend(WritesMixin, ReadsMixin, StorageBackend):
    """SQLite (standard library) store per user; exact vector and BM25 search in process."""

    name: ClassVar[str] = "sqlite"
    description: ClassVar[str] = "SQLite file per user (standard library), the reference backend"
    multi_tenant: ClassVar[bool] = False
    #: SQLite locks per transaction, not per open: several processes may share a store.
    single_process: ClassVar[bool] = False

    def __init__(self, user: str, path: Path | str) -> None:
        super().__init__(validate_user(user, "user"))
        self.path = Path(path)
        self.engram_vectors = VectorTable("engram", typed=True)
        self.cue_vectors = VectorTable("cue", typed=False)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.RLock()
        #: Bumped by every open and close: a thread's connection of an older one is stale.
        self._generation = 0
        self._is_open = False

    @classmethod
    def from_settings(cls, settings: Settings, user: str) -> SqliteBackend:
        """The store of ``user`` under ``STORAGE_LOCATION``."""
        return cls(user, settings.user_dir(user) / DB_FILE)

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Open (or create) the file and migrate it; refuse a file that is not ours."""
        if self._is_open:
            return
        if self.path.is_dir():
            raise BackendError(f"{self.path} is a directory, not a Smriti SQLite store")
        with self._errors("cannot open the store"):
            private_dir(self.path.parent)
            conn = schema.connect(self.path)
            try:
                applied = schema.migrate(conn, self.path)
            except BaseException:
                conn.close()
                raise
        if applied:
            log.info("sqlite schema migrated", path=str(self.path), versions=applied)
        with self._conns_lock:
            self._generation += 1
            self._conns.append(conn)
            self._is_open = True
        self._local.conn, self._local.generation = conn, self._generation

    def close(self) -> None:
        """Close every thread's connection; safe to call twice."""
        with self._write_lock, self._conns_lock:
            for conn in self._conns:
                try:
                    conn.close()
                except sqlite3.Error as exc:  # closing must not fail; commits are on disk
                    log.warning("sqlite connection not closed", path=str(self.path), error=str(exc))
            self._conns.clear()
            self._generation += 1
            self._is_open = False
        self.engram_vectors.clear()
        self.cue_vectors.clear()

    # -- connections and transactions ---------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        """This thread's connection to the open store."""
        local = self._local
        if getattr(local, "generation", None) == self._generation:
            return local.conn
        with self._conns_lock:
            if not self._is_open:
                raise BackendError(f"the SQLite store {self.path} is not open")
            conn = schema.connect(self.path)
            self._conns.append(conn)
            local.conn, local.generation = conn, self._generation
        return conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees one snapshot."""
        with self._errors("a read failed"):
            conn = self._conn()
            if conn.in_transaction:  # nested in a write or read of this thread
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextmanager
    def _write(self, what: str = "nothing was changed") -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and synced) on success, else rolled back."""
        with self._write_lock, self._errors(what):
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """SQLite's errors as BackendErrors naming the store and what became of the call."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StoreLockedError(
                    f"the SQLite store {self.path} stayed locked by another writer for "
                    f"{schema.BUSY_SECONDS:.0f} s: {what}; retry"
                ) from exc
            if "full" in text:
                raise StorageFullError(
                    f"disk full at {self.path.parent}: {what}; free space and retry"
                ) from exc
            raise BackendError(f"SQLite failed on {self.path} ({text}): {what}") from exc
        except sqlite3.Error as exc:
            raise BackendError(f"SQLite failed on {self.path} ({exc}): {what}") from exc
        except OSError as exc:
            raise BackendError(f"cannot use {self.path} ({exc}): {what}") from exc
