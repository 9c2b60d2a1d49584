"""Backups as consistent snapshots that merge, never overwrite.

Sync (``push_snapshot``), one at a time per engine:

1. ``fetch`` the remote snapshot, unless its version is the one this store merged or
   pushed last (kept in the store's metadata, ``backup.{provider}.seen``).
2. When it was fetched, check it and merge it into the store (``smriti.portable.merge``:
   union by id, newer version wins, tombstones honoured). A snapshot that is not a
   valid Smriti export of this user is never overwritten: the sync fails with a
   message naming the remote and the path inside it, until a person fixes or removes
   that file.
3. Export the store. When the export equals the remote snapshot, or nothing changed
   since the last push, nothing is pushed.
4. ``push_if`` on the condition that the remote still holds the fetched version; when
   another machine pushed in between, go back to 1 (at most ``ATTEMPTS`` times).

Restore: at open, an empty store is filled from the remote snapshot. When the remote
cannot be reached, or its snapshot is refused, the engine serves the local store and
the next sync fetches and merges before it pushes anything.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from smriti.backup import Fetched, SnapshotConflict, SyncReport
from smriti.errors import BackupError, ConfigError, InvalidInput
from smriti.logs import get_logger
from smriti.progress import Progress, ProgressArg, progress_bar

if TYPE_CHECKING:
    from smriti.engine.core import Engine
    from smriti.portable import ExportReport
    from smriti.portable.merge import Graph

log = get_logger(__name__)

SNAPSHOT_FILE = "memory.jsonl"
DIGEST_KEY = "backup.{provider}.digest"
SEEN_KEY = "backup.{provider}.seen"
#: Fetch-merge-push rounds before a sync gives up (each lost round means another
#: machine pushed in between; the next periodic sync tries again).
ATTEMPTS = 8
BACKOFF_S = 0.25


@dataclass(slots=True)
class _Remote:
    """A fetched remote snapshot and its body digest (empty when none was fetched)."""

    fetched: Fetched
    digest: str = ""


def push_snapshot(engine: Engine, progress: ProgressArg = False) -> SyncReport:
    """Merge the remote snapshot if it changed, then push the store's snapshot.

    ``progress`` (see ``smriti.progress``) names each phase as it starts."""
    if engine.backup.name == "none":
        return engine.backup.push(Path("."))
    # one sync at a time (the periodic thread and an explicit sync may overlap)
    with engine.push_lock, progress_bar(progress, "sync: waiting") as bar:
        engine.dirty.clear()
        try:
            for attempt in range(1, ATTEMPTS + 1):
                report = _attempt(engine, bar)
                if report is not None:
                    return report
                log.info("remote snapshot changed while syncing; merging again", attempt=attempt)
                # a random pause, growing: two machines pushing in lockstep fall apart
                time.sleep(random.uniform(0.0, BACKOFF_S * attempt))
        except Exception:
            engine.dirty.set()
            raise
        engine.dirty.set()
        raise BackupError(
            f"{engine.backup.location()} changed {ATTEMPTS} times while this sync merged it "
            "(other machines are pushing); nothing was overwritten, the next sync tries again"
        )


def _key(engine: Engine, template: str) -> str:
    return template.format(provider=engine.backup.name)


def _attempt(engine: Engine, bar: Progress) -> SyncReport | None:
    """One fetch-merge-push round; None when another machine pushed meanwhile."""
    from smriti.portable import export_store

    meta = engine.backend
    seen = meta.get_meta(_key(engine, SEEN_KEY))
    with tempfile.TemporaryDirectory(prefix="smriti-sync-") as tmp:
        bar.set_label(f"sync: fetching from {engine.backup.name} and merging")
        remote = _fetch_and_merge(engine, Path(tmp) / "remote", seen)
        out = Path(tmp) / "snapshot"
        out.mkdir()
        bar.set_label("sync: exporting the store")
        exported = export_store(engine, out / SNAPSHOT_FILE, progress=False)
        version = remote.fetched.version
        if exported.body_digest == remote.digest or (
            not remote.digest
            and version == seen
            and exported.body_digest == meta.get_meta(_key(engine, DIGEST_KEY))
        ):
            _remember(engine, version, exported.body_digest)
            log.info("backup up to date: nothing to push", provider=engine.backup.name)
            return SyncReport(
                engine.backup.name,
                skipped=1,
                message="nothing to push: the backup already holds this store",
                version=version,
            )
        bar.set_label(f"sync: pushing to {engine.backup.name}")
        try:
            report = engine.backup.push_if(out, remote.fetched)
        except SnapshotConflict:
            return None
    _remember(engine, report.version, exported.body_digest)
    _log_push(report, exported)
    return report


def _fetch_and_merge(engine: Engine, target: Path, seen: str | None) -> _Remote:
    fetched = engine.backup.fetch(target, seen)
    snapshot = target / SNAPSHOT_FILE
    if not fetched.downloaded or not snapshot.is_file():
        return _Remote(fetched)
    return _Remote(fetched, _merge_fetched(engine, fetched, snapshot))


def _merge_fetched(engine: Engine, fetched: Fetched, snapshot: Path) -> str:
    """Check and merge a fetched snapshot; return its body digest."""
    from smriti.portable.merge import merge_snapshot

    with _refusing(engine, fetched, snapshot):
        graph = _read_checked(engine, snapshot)
        report = merge_snapshot(engine, graph)
    if report.forgotten:  # forgotten on another machine: erased here too, as a forget is
        engine.erasure.request()
    if report.changed:
        log.info(
            "merged the remote snapshot",
            provider=engine.backup.name,
            added=report.added,
            updated=report.updated,
            forgotten=report.forgotten,
            cues=report.cues,
            edges=report.edges,
            seconds=report.seconds,
        )
    return graph.body_digest


class _refusing:  # noqa: N801 - used as a context manager, reads like one
    """Turn a bad snapshot into a BackupError naming the remote file, not a temp path."""

    def __init__(self, engine: Engine, fetched: Fetched, local: Path) -> None:
        self.engine = engine
        self.fetched = fetched
        self.local = local

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, InvalidInput | ConfigError | UnicodeDecodeError | OSError):
            reason = " ".join(str(exc).replace(str(self.local), "the file").split())[:400]
            raise BackupError(
                f"the remote snapshot {self.fetched.where} cannot be merged: {reason}. "
                "Smriti will not overwrite it, and syncs fail until it is resolved: "
                "inspect that file, then repair it or remove it from the remote (your "
                "local memories are kept; the next sync pushes them)"
            ) from exc


def _read_checked(engine: Engine, snapshot: Path) -> Graph:
    """The parsed snapshot; InvalidInput when it is not a valid export of this user."""
    from smriti.portable.merge import read_snapshot

    graph = read_snapshot(snapshot)
    owner = graph.header.get("user")
    if owner not in (None, engine.user):
        raise InvalidInput(f"it is the export of user {owner!r}, not of {engine.user!r}")
    return graph


def _remember(engine: Engine, version: str | None, digest: str) -> None:
    if version is not None:
        engine.backend.set_meta(_key(engine, SEEN_KEY), version)
    engine.backend.set_meta(_key(engine, DIGEST_KEY), digest)


def _log_push(report: SyncReport, exported: ExportReport) -> None:
    log.info(
        "backup pushed",
        provider=report.provider,
        pushed=len(report.pushed),
        engrams=exported.counts["engrams"],
        tombstones=exported.tombstones,
        bytes=exported.bytes,
    )


def restore_if_empty(engine: Engine) -> bool:
    """At startup: when the store is empty and a backup exists, import it.

    An unreachable remote or a refused snapshot is logged and leaves the engine serving
    the (empty) local store; the next sync fetches and merges before it pushes.
    """
    if engine.backup.name == "none" or engine.backend.count_engrams() > 0:
        return False
    try:
        return _restore(engine)
    except BackupError as exc:
        log.error(
            "backup restore failed; serving the local store, the next sync retries the "
            "restore before pushing",
            provider=engine.backup.name,
            error=str(exc),
        )
        return False


def _restore(engine: Engine) -> bool:
    from smriti.portable import import_store, tombstones

    with tempfile.TemporaryDirectory(prefix="smriti-restore-") as tmp:
        fetched = engine.backup.fetch(Path(tmp), None)
        snapshot = Path(tmp) / SNAPSHOT_FILE
        if not fetched.downloaded or not snapshot.exists():
            return False
        if tombstones.load(engine.backend):  # an emptied store, not a new one: merge
            _merge_fetched(engine, fetched, snapshot)
            return True
        with _refusing(engine, fetched, snapshot):
            _read_checked(engine, snapshot)  # the whole file, before anything is written
            # a line on a terminal (a CLI command that opened the store itself)
            report = import_store(engine, snapshot, progress=None)
    # the store now equals the remote snapshot: nothing to push back
    _remember(engine, fetched.version, report.body_digest)
    engine.dirty.clear()
    log.info("memory restored from backup", provider=engine.backup.name,
             engrams=report.counts["engrams"], tombstones=report.tombstones)  # fmt: skip
    return True
