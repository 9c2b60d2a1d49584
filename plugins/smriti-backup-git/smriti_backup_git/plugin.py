"""Entry point of the git backup plugin: registers the provider class only.

The provider module is imported when the registry is built, not when smriti starts
(``smriti --help`` stays fast); it needs the system ``git`` only when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from smriti import BackupProvider, DoctorCheck, Settings, StorageBackend


@hookimpl
def register_backup_providers() -> list[type[BackupProvider]]:
    """The git provider (``BACKUP_TYPE=git``, alias ``github``)."""
    from smriti_backup_git.provider import GitBackup

    return [GitBackup]


@hookimpl
def doctor_probes(
    settings: Settings, backend: StorageBackend | None, backup: BackupProvider | None
) -> list[Callable[[], DoctorCheck]] | None:
    """Whether the backup remote answers ``git ls-remote``, when the git backup is
    configured."""
    from smriti_backup_git.doctor import git_remote
    from smriti_backup_git.provider import GitBackup

    if not isinstance(backup, GitBackup):
        return None
    remote = backup.remote
    return [lambda: git_remote(remote)]
