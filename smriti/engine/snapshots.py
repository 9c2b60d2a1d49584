"""Backups as consistent snapshots: a portable export pushed, restored when empty."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from smriti.backup import SyncReport
from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.engine.core import Engine

log = get_logger(__name__)


def push_snapshot(engine: Engine) -> SyncReport:
    """Export the user's graph into a temporary directory and hand it to the provider."""
    if engine.backup.name == "none":
        return engine.backup.push(Path("."))
    from smriti.portable import export_store

    engine.dirty.clear()
    with tempfile.TemporaryDirectory(prefix="smriti-snapshot-") as tmp:
        try:
            export_store(engine, Path(tmp) / "memory.jsonl")
            report = engine.backup.push(Path(tmp))
        except Exception:
            engine.dirty.set()
            raise
    log.info("backup pushed", provider=report.provider, pushed=len(report.pushed))
    return report


def restore_if_empty(engine: Engine) -> bool:
    """At startup: when the store is empty and a backup exists, import it."""
    if engine.backup.name == "none" or engine.backend.count_engrams() > 0:
        return False
    from smriti.portable import import_store

    with tempfile.TemporaryDirectory(prefix="smriti-restore-") as tmp:
        if not engine.backup.restore(Path(tmp)):
            return False
        snapshot = Path(tmp) / "memory.jsonl"
        if not snapshot.exists():
            return False
        import_store(engine, snapshot)
    log.info("memory restored from backup", provider=engine.backup.name)
    return True
