"""Entry point of the S3 backup plugin: registers the provider class only.

boto3 is imported when the provider first talks to S3, so loading this plugin stays
cheap and a broken boto3 install fails only this provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from smriti import BackupProvider, DoctorCheck, Settings, StorageBackend


@hookimpl
def register_backup_providers() -> list[type[BackupProvider]]:
    """The S3 provider (``BACKUP_TYPE=s3``)."""
    from smriti_backup_s3.provider import S3Backup

    return [S3Backup]


@hookimpl
def doctor_probes(
    settings: Settings, backend: StorageBackend | None, backup: BackupProvider | None
) -> list[Callable[[], DoctorCheck]] | None:
    """Whether the S3 endpoint answers, when the S3 backup is configured."""
    from smriti_backup_s3.doctor import endpoint_url, http_endpoint
    from smriti_backup_s3.provider import S3Backup

    if not isinstance(backup, S3Backup):
        return None
    url = endpoint_url(backup.options["S3_ENDPOINT"], backup.options["S3_REGION"])
    return [lambda: http_endpoint(url)]
