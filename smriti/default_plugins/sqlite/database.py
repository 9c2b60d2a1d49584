"""One user's SQLite file: its connections, transactions and errors.

Each thread has its own connection. ``read`` runs several statements in one read
transaction (a consistent snapshot) that never waits for a writer; ``write`` is one
``BEGIN IMMEDIATE`` transaction, serialised within the process by a lock and between
processes by SQLite's file lock. SQLite's and the file system's errors leave as
BackendErrors naming the store and what became of the call.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from smriti import get_logger
from smriti.backend import BackendError, StorageFullError, StoreLockedError, private_dir
from smriti.default_plugins.sqlite import schema

log = get_logger(__name__)


class Database:
    """The SQLite file at ``path``: opened, migrated, used by any thread, closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.RLock()
        #: Bumped by every open and close: a thread's connection of an older one is stale.
        self._generation = 0
        self._is_open = False

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Open (or create) the file and migrate it; refuse a file that is not ours."""
        if self._is_open:
            return
        if self.path.is_dir():
            raise BackendError(f"{self.path} is a directory, not a Smriti SQLite store")
        with self.errors("cannot open the store"):
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

    # -- connections and transactions ---------------------------------------------------
    def connection(self) -> sqlite3.Connection:
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
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees one snapshot."""
        with self.errors("a read failed"):
            conn = self.connection()
            if conn.in_transaction:  # nested in a write or read of this thread
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextmanager
    def write(self, what: str = "nothing was changed") -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and synced) on success, else rolled back;
        ``what`` says what became of the call if it fails."""
        with self._write_lock, self.errors(what):
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def truncate_wal(self, what: str) -> None:
        """Copy the WAL into the file and empty it (a TRUNCATE checkpoint). Raises
        BackendError, saying ``what`` became of the call, when a reader of another
        process kept the WAL in use."""
        with self._write_lock, self.errors(what):
            busy = self.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            raise BackendError(
                f"{what}: another process kept reading {self.path}; forget again once it "
                "is done (the next forget or checkpoint erases them)"
            )

    @contextmanager
    def errors(self, what: str) -> Iterator[None]:
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
