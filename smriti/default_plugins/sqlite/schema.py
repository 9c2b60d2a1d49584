"""The SQLite schema of one user's store, its migrations, and the checks made at open.

A store file carries ``PRAGMA application_id`` = ``APPLICATION_ID`` and
``PRAGMA user_version`` = the schema version it was migrated to. A file that is not an
SQLite database, or is one that some other program made, is refused and left as it
is: opening never replaces a file with an empty store.

Edges reference their endpoints with ``ON DELETE CASCADE``, so deleting an engram or a
cue removes every edge touching it in the same statement. The ``epoch`` table counts
changes that remove or replace embeddings; with the ever-increasing ``seq`` of
AUTOINCREMENT it tells an in-process vector table (``vectors``) whether to append new
rows or to reload, whichever process made the change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from smriti.backend import BackendError

#: "Smri" in ASCII: marks a file as a Smriti store.
APPLICATION_ID = 0x536D7269
SCHEMA_VERSION = 3
#: Seconds a statement waits for another process's write lock before failing.
BUSY_SECONDS = 30.0

_V1 = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE epoch (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT INTO epoch (name, value) VALUES ('engram', 0), ('cue', 0)",
    """CREATE TABLE engram (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL,
        summary TEXT NOT NULL,
        memory_type TEXT NOT NULL,
        importance REAL NOT NULL,
        access_count INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        last_accessed_at INTEGER NOT NULL,
        decay_factor REAL NOT NULL,
        embedding BLOB,
        source TEXT NOT NULL,
        tags TEXT NOT NULL,
        cluster_id INTEGER NOT NULL,
        terms INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX engram_by_access ON engram (last_accessed_at DESC, created_at DESC, id)",
    """CREATE TABLE cue (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        key TEXT NOT NULL,
        cue_type TEXT NOT NULL,
        embedding BLOB
    )""",
    "CREATE INDEX cue_by_key ON cue (key)",
    """CREATE TABLE link (
        engram_id TEXT NOT NULL REFERENCES engram (id) ON DELETE CASCADE,
        cue_id TEXT NOT NULL REFERENCES cue (id) ON DELETE CASCADE,
        strength REAL NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (engram_id, cue_id)
    ) WITHOUT ROWID""",
    # Covering indexes for recall's "engrams of these cues, most important first".
    "CREATE INDEX link_by_cue ON link (cue_id, engram_id, strength)",
    "CREATE INDEX engram_importance ON engram (id, importance)",
    # BM25's average length without reading every engram row (10k: 10.7 -> 1.1 ms).
    "CREATE INDEX engram_terms ON engram (terms)",
    """CREATE TABLE association (
        source_id TEXT NOT NULL REFERENCES engram (id) ON DELETE CASCADE,
        target_id TEXT NOT NULL REFERENCES engram (id) ON DELETE CASCADE,
        strength REAL NOT NULL,
        relation_type TEXT NOT NULL,
        created_at INTEGER,
        PRIMARY KEY (source_id, target_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX association_by_target ON association (target_id)",
    """CREATE TABLE cooccurrence (
        source_id TEXT NOT NULL REFERENCES cue (id) ON DELETE CASCADE,
        target_id TEXT NOT NULL REFERENCES cue (id) ON DELETE CASCADE,
        strength REAL NOT NULL,
        PRIMARY KEY (source_id, target_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX cooccurrence_by_target ON cooccurrence (target_id)",
    # The lexical index: term frequencies per engram (terms from smriti's one analyzer).
    """CREATE TABLE posting (
        term TEXT NOT NULL,
        engram_seq INTEGER NOT NULL REFERENCES engram (seq) ON DELETE CASCADE,
        tf INTEGER NOT NULL,
        PRIMARY KEY (term, engram_seq)
    ) WITHOUT ROWID""",
    "CREATE INDEX posting_by_engram ON posting (engram_seq)",
)

#: Columns added by version 2: an engram's place in a version chain. The defaults are
#: what a memory stored before versions existed is: current, and corrected nothing.
_V2_COLUMNS = (
    ("supersedes", "TEXT NOT NULL DEFAULT ''"),
    ("superseded_by", "TEXT NOT NULL DEFAULT ''"),
    ("superseded_at", "INTEGER"),
)

#: Columns added by version 3: who said it. '' is what a memory stored before origins
#: were recorded is: unknown (never guessed).
_V3_COLUMNS = (
    ("origin", "TEXT NOT NULL DEFAULT ''"),
    ("principal", "TEXT NOT NULL DEFAULT ''"),
)


def _add_columns(conn: sqlite3.Connection, columns: tuple[tuple[str, str], ...]) -> None:
    have = {row[1] for row in conn.execute("PRAGMA table_info(engram)")}
    for column, declaration in columns:
        if column not in have:  # ADD COLUMN keeps every row; a column is added only once
            conn.execute(f"ALTER TABLE engram ADD COLUMN {column} {declaration}")


def _v1(conn: sqlite3.Connection) -> None:
    for statement in _V1:
        conn.execute(statement)


def _v2(conn: sqlite3.Connection) -> None:
    """The version fields, and a listing index whose backward scan is the listing order
    (last access, creation and id all descending; version 1's sorted ids ascending)."""
    _add_columns(conn, _V2_COLUMNS)
    conn.execute("DROP INDEX IF EXISTS engram_by_access")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS engram_by_listing ON engram (last_accessed_at, created_at, id)"
    )


def _v3(conn: sqlite3.Connection) -> None:
    """The origin fields (who said it)."""
    _add_columns(conn, _V3_COLUMNS)


#: What brings a store from version ``n - 1`` to ``n`` (inside the migration's transaction).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1, 2: _v2, 3: _v3}


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), with foreign keys
    enforced, every commit synced to disk (``synchronous=FULL``) and deleted content
    overwritten with zeros (``secure_delete``: a forgotten memory's text must not stay
    in the file's free space; ``erase_deleted`` then truncates the WAL)."""
    conn = sqlite3.connect(
        path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA secure_delete = ON")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise not_a_store(path, exc) from exc
    return conn


def not_a_store(path: Path, exc: Exception) -> BackendError:
    """The error for a file SQLite cannot read as a database (foreign or damaged)."""
    return BackendError(
        f"{path} is not a Smriti SQLite store ({exc}); it was left untouched: "
        "move it aside or point STORAGE_LOCATION elsewhere"
    )


def check(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version of the store at ``path`` (0: a new, empty file).

    Raises BackendError for a file that is not an SQLite database, belongs to another
    program, or was made by a newer Smriti. Reads only.
    """
    try:
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise not_a_store(path, exc) from exc
    if app == 0 and tables == 0:
        return 0
    if app != APPLICATION_ID:
        raise BackendError(
            f"{path} is an SQLite database of another program (application_id {app:#x}); "
            "it was left untouched: move it aside or point STORAGE_LOCATION elsewhere"
        )
    if version > SCHEMA_VERSION:
        raise BackendError(
            f"{path} has schema version {version}, newer than this Smriti understands "
            f"({SCHEMA_VERSION}): upgrade smriti"
        )
    return int(version)


def migrate(conn: sqlite3.Connection, path: Path) -> list[int]:
    """Bring the store up to ``SCHEMA_VERSION`` in one transaction; returns the versions
    applied (none when it is current). Idempotent."""
    if check(conn, path) == SCHEMA_VERSION:
        return []
    # WAL lets readers of other connections and processes run during a write; it is a
    # property of the file, so it is set once, outside a transaction.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = check(conn, path)  # another process may have migrated meanwhile
        applied = list(range(current + 1, SCHEMA_VERSION + 1))
        for version in applied:
            MIGRATIONS[version](conn)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID:d}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return applied
