"""Entry point of the S3 backup plugin: registers the provider class only.

boto3 is imported when the provider first talks to S3, so loading this plugin stays
cheap and a broken boto3 install fails only this provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from smriti import BackupProvider


@hookimpl
def register_backup_providers() -> list[type[BackupProvider]]:
    """The S3 provider (``BACKUP_TYPE=s3``)."""
    from smriti_backup_s3.provider import S3Backup

    return [S3Backup]
