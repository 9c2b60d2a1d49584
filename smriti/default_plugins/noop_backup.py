"""The built-in ``none`` backup provider: backups switched off."""

from __future__ import annotations

from pathlib import Path

from smriti import BackupProvider, SyncReport, hookimpl


class NoBackup(BackupProvider):
    """Does nothing; selected by ``BACKUP_TYPE=none`` (the default)."""

    name = "none"
    aliases = ("off",)
    description = "no backup"

    def restore(self, target: Path) -> bool:
        return False

    def push(self, snapshot: Path) -> SyncReport:
        return SyncReport(self.name, message="backup is off (BACKUP_TYPE=none)")


@hookimpl
def register_backup_providers() -> list[type[BackupProvider]]:
    return [NoBackup]
