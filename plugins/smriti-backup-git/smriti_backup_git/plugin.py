"""Entry point of the git backup plugin: registers the provider class only.

The provider module is imported when the registry is built, not when smriti starts
(``smriti --help`` stays fast); it needs the system ``git`` only when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from smriti import BackupProvider


@hookimpl
def register_backup_providers() -> list[type[BackupProvider]]:
    """The git provider (``BACKUP_TYPE=git``, alias ``github``)."""
    from smriti_backup_git.provider import GitBackup

    return [GitBackup]
