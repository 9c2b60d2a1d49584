"""Backups as consistent snapshots: a portable export pushed, restored when empty.

Push: the user's graph is exported (``smriti.portable``) into a temporary directory as
``memory.jsonl`` and handed to the provider. When the export's records are identical to
the last snapshot this store pushed (its body digest is kept in the store's metadata),
the provider is not called at all.

Restore: at open, an empty store is filled from the provider's latest snapshot. When
the remote cannot be reached then, the engine still serves the local store, and the
next sync first merges the remote snapshot into the local store, so a backup made
elsewhere is never overwritten by a store that missed it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from smriti.backup import SyncReport
from smriti.errors import BackupError
from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.engine.core import Engine

log = get_logger(__name__)

SNAPSHOT_FILE = "memory.jsonl"
DIGEST_KEY = "backup.{provider}.digest"


def push_snapshot(engine: Engine) -> SyncReport:
    """Export the user's graph into a temporary directory and hand it to the provider."""
    if engine.backup.name == "none":
        return engine.backup.push(Path("."))
    # one push at a time (the periodic thread and an explicit sync may overlap)
    with engine.push_lock:
        return _push(engine)


def _push(engine: Engine) -> SyncReport:
    from smriti.portable import export_store

    if engine.restore_pending:
        _restore(engine, merge=True)
        engine.restore_pending = False
    engine.dirty.clear()
    key = DIGEST_KEY.format(provider=engine.backup.name)
    with tempfile.TemporaryDirectory(prefix="smriti-snapshot-") as tmp:
        try:
            exported = export_store(engine, Path(tmp) / SNAPSHOT_FILE, progress=False)
            if exported.body_digest == engine.backend.get_meta(key):
                log.info("backup unchanged: nothing to push", provider=engine.backup.name)
                return SyncReport(
                    engine.backup.name,
                    skipped=1,
                    message="nothing to push: no change since the last backup",
                )
            report = engine.backup.push(Path(tmp))
        except Exception:
            engine.dirty.set()
            raise
    engine.backend.set_meta(key, exported.body_digest)
    log.info(
        "backup pushed",
        provider=report.provider,
        pushed=len(report.pushed),
        engrams=exported.counts["engrams"],
        bytes=exported.bytes,
    )
    return report


def restore_if_empty(engine: Engine) -> bool:
    """At startup: when the store is empty and a backup exists, import it.

    An unreachable remote is logged and leaves the engine serving the (empty) local
    store; the next push merges the remote snapshot in before uploading.
    """
    if engine.backup.name == "none" or engine.backend.count_engrams() > 0:
        return False
    try:
        return _restore(engine, merge=False)
    except BackupError as exc:
        engine.restore_pending = True
        log.error(
            "backup restore failed; serving the local store, the next sync retries the "
            "restore before pushing",
            provider=engine.backup.name,
            error=str(exc),
        )
        return False


def _restore(engine: Engine, merge: bool) -> bool:
    from smriti.portable import import_store

    with tempfile.TemporaryDirectory(prefix="smriti-restore-") as tmp:
        if not engine.backup.restore(Path(tmp)):
            return False
        snapshot = Path(tmp) / SNAPSHOT_FILE
        if not snapshot.exists():
            return False
        report = import_store(engine, snapshot, progress=False, merge=merge)
    if not merge:  # the store now equals the remote snapshot: nothing to push back
        engine.backend.set_meta(DIGEST_KEY.format(provider=engine.backup.name), report.body_digest)
        engine.dirty.clear()
    log.info(
        "memory restored from backup",
        provider=engine.backup.name,
        merged=merge,
        engrams=report.counts["engrams"],
    )
    return True
