"""Durability guards of the Kùzu store: free space, the manifest, and Kùzu's I/O failures.

Kùzu 0.11.3 is not safe on a full disk (found by experiment on a 20 MB tmpfs):

- A commit whose automatic checkpoint fails raises a misleading "Invalid transaction
  type to rollback"; the next query on that connection segfaults and closing aborts
  (``terminate called after throwing kuzu::common::IOException``). So the backend
  opens Kùzu with ``auto_checkpoint`` off and checkpoints itself, only with room to do
  so; a failed explicit ``CHECKPOINT`` is a plain error and harms nothing.
- A commit that cannot write its WAL record raises a plain error and reads still work,
  but the WAL is left with a partial record and the memory state with the failed
  transaction's rows (writing them again: "duplicated primary key"); a checkpoint then
  crashed the process (SIGSEGV) and closing aborts while the disk is still full. So no
  Kùzu write starts without headroom (``KUZU_RESERVE``), new memories are refused
  earlier (``STORE_RESERVE``) so that the journaled ones always fit, and after a failed
  write the database takes no more writes and is left to the operating system at
  close instead of closed (``abandon``): its WAL holds every commit but the failed one,
  the journal every stored memory, and the next open replays both.
- Kùzu never shrinks its database file (checked: inserting 3,000 rows, deleting them,
  dropping the table and checkpointing keeps the size), so a file smaller than it was
  at its last checkpoint has lost data.

The manifest (``memory.kuzu.manifest.json``) records a lower bound of the memories the
store holds and the database file's size at its last checkpoint. It is raised after
checkpoints and at close, and lowered before a delete commits, so a forget or a prune
never makes a sound store look damaged. An open refuses a missing, empty or shrunken
file, or one holding fewer memories, when the manifest says memories were there.
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from smriti import get_logger
from smriti.backend import BackendError, StorageFullError, open_private

log = get_logger(__name__)

MIB = 2**20
#: No new memory is accepted with less free space than this (plus three times its
#: journal line): the journaled memories must still fit in Kùzu's WAL and checkpoint.
STORE_RESERVE = 4 * MIB
#: No Kùzu write transaction starts with less free space than this (plus its estimate).
KUZU_RESERVE = 1 * MIB
#: Checkpoint once the WAL is this large (Kùzu's own default threshold).
CHECKPOINT_WAL_BYTES = 16 * MIB
#: A checkpoint is tried only with this much free space plus four times the WAL. Kùzu
#: 0.11.3 grows its file by far more than the WAL at a checkpoint (measured: the first
#: memory's checkpoint made a 5.6 MB file, the next ten's grew it by 9.1 MB, later ones
#: by 3-4 times the WAL) and keeps the space even when the checkpoint fails.
CHECKPOINT_ROOM = 16 * MIB
#: Free space a co-occurrence fold needs per pending memory, beyond ``KUZU_RESERVE``
#: (measured: folding 834 memories' rows grew the WAL by 3.1 MB and the file by 1 MB).
FOLD_BYTES = 8 * 1024
MANIFEST_SUFFIX = ".manifest.json"
MANIFEST_VERSION = 1
#: Kùzu's text for a failed read or write of its files.
_IO_MARKERS = ("IO exception", "No space left", "Cannot write to file")
#: The system's text for a full disk, quota or file-size limit.
_FULL_MARKERS = ("No space left", "Disk quota exceeded", "File too large")
#: Databases deliberately never closed (``abandon``): closing them would abort.
_ABANDONED: list[Any] = []


def free_bytes(path: Path) -> int:
    """Bytes available to this process on the filesystem holding ``path``'s folder."""
    folder = path if path.is_dir() else path.parent
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


def checkpoint_room(wal_bytes: int) -> int:
    """Free space needed before a checkpoint of a WAL of ``wal_bytes`` is tried."""
    return CHECKPOINT_ROOM + 4 * wal_bytes


def has_room(path: Path, needed: int) -> bool:
    """Whether ``needed`` bytes fit beside ``path`` (False when it cannot be checked)."""
    try:
        return free_bytes(path) >= needed
    except OSError:
        return False


def disk_full(path: Path, what: str) -> StorageFullError:
    """The error for ``what`` (e.g. "the memory was not stored") on a full disk."""
    folder = path.parent
    try:
        left = f"{free_bytes(path) / MIB:.1f} MB left"
    except OSError:
        left = "free space unknown"
    return StorageFullError(
        f"disk full: {what}; free space at {folder} and retry ({left} there, and the "
        f"store keeps {STORE_RESERVE // MIB} MB in reserve so that what it acknowledged "
        "always reaches the database). Every memory stored so far is kept"
    )


def kuzu_failed(path: Path, what: str) -> StorageFullError:
    """The error for any write after Kùzu failed to write its files (``what`` is not
    done): its in-memory state is then ahead of its WAL, so it takes no more writes."""
    return StorageFullError(
        f"disk full: {what}; free space at {path.parent} and restart smriti (Kùzu failed "
        "to write its files there and takes no more writes in this process). Every memory "
        "stored so far is kept"
    )


def is_io_failure(exc: BaseException) -> bool:
    """Whether a Kùzu error is a failed read or write of its files."""
    text = str(exc)
    return any(marker in text for marker in _IO_MARKERS)


def is_full(exc: BaseException) -> bool:
    """Whether an error says the disk, a quota or the file-size limit is full (Kùzu
    reports a short write as "Cannot write to file ... Error: Success")."""
    text = str(exc)
    short = "Cannot write to file" in text and "Error: Success" in text
    return short or any(marker in text for marker in _FULL_MARKERS)


def abandon(database: Any) -> None:
    """Keep ``database`` alive until the process exits, so its destructor never runs.

    Kùzu's destructor aborts the process when its WAL cannot be flushed (a full disk
    after a failed write); the operating system releases the files and the lock at
    exit, and the WAL and the journal hold everything committed.
    """
    _ABANDONED.append(database)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(database))  # survives interpreter teardown


# -- the manifest ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Manifest:
    """What the store is known to hold, kept beside the database."""

    #: A lower bound of the memories (engrams) the store holds.
    engrams: int
    #: The database file's size at its last checkpoint (Kùzu never shrinks it).
    db_bytes: int


def manifest_path(db: Path) -> Path:
    """``memory.kuzu.manifest.json`` beside ``db``."""
    return db.with_name(db.name + MANIFEST_SUFFIX)


def read_manifest(db: Path) -> Manifest | None:
    """The manifest of ``db``, or None (a store made before manifests, or a new one)."""
    path = manifest_path(db)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Manifest(int(data["engrams"]), int(data["db_bytes"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackendError(
            f"the manifest {path} is damaged ({exc}); the store was left untouched. If "
            f"{db.name} is sound, move the manifest aside and open again"
        ) from None


def write_manifest(db: Path, manifest: Manifest) -> None:
    """Replace the manifest atomically (temporary file, fsync, rename, folder fsync)."""
    path = manifest_path(db)
    scratch = path.with_name(path.name + ".tmp")
    data = json.dumps({"version": MANIFEST_VERSION, **asdict(manifest)}).encode()
    try:
        with open_private(scratch, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(scratch, path)
    except OSError:
        scratch.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def check_file(db: Path, manifest: Manifest | None) -> None:
    """Before Kùzu opens ``db``: refuse a missing, empty or shrunken file that the
    manifest says held memories (Kùzu would silently make a new, empty store)."""
    if manifest is None or manifest.engrams <= 0:
        return
    try:
        size = db.stat().st_size
    except FileNotFoundError:
        raise _lost(db, manifest, "is missing") from None
    if size == 0:
        raise _lost(db, manifest, "is empty (0 bytes)")
    if size < manifest.db_bytes:
        raise _lost(db, manifest, f"has shrunk to {size:,} bytes from {manifest.db_bytes:,}")


def check_count(db: Path, manifest: Manifest | None, engrams: int) -> None:
    """After the open: refuse a store holding fewer memories than the manifest says."""
    if manifest is not None and engrams < manifest.engrams:
        raise _lost(db, manifest, f"holds only {engrams:,} memories")


def _lost(db: Path, manifest: Manifest, what: str) -> BackendError:
    return BackendError(
        f"the Kùzu store {db} {what}, but it held {manifest.engrams:,} memories "
        f"(per {manifest_path(db).name}): refusing to open it as an empty store. To recover, "
        f"move {db}* aside (keep them), then restore: `smriti import FILE` from an export, "
        "or start with BACKUP_TYPE set to restore the configured backup. To start empty "
        f"deliberately, move {db}* aside"
    )
