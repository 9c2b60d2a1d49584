"""The settings the S3 backup reads (``S3Backup.declared_settings``)."""

from __future__ import annotations

import re

from smriti import ConfigError, Setting


def bucket_name(name: str, raw: str) -> str:
    """An S3 bucket name as AWS and MinIO accept it (moto accepts more, so it is
    checked here): 3-63 lower-case letters, digits, ``-`` or ``.``, no ``..``, not an
    IP address."""
    value = raw.strip()
    ok = re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", value) and ".." not in value
    if not ok or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", value):
        raise ConfigError(
            f"{name}={raw!r} is not a valid S3 bucket name (3-63 lower-case letters, "
            "digits, '-' or '.', starting and ending with a letter or digit)"
        )
    return value


S3_ENDPOINT = Setting.url(
    "S3_ENDPOINT", "", help="S3-compatible endpoint (MinIO, Ceph, ...); empty: AWS S3."
)
S3_REGION = Setting.text("S3_REGION", "", help="S3 region; empty: the AWS configuration's.")
S3_ACCESS_KEY = Setting.text(
    "S3_ACCESS_KEY", "", secret=True, help="S3 access key; empty: the AWS credential chain."
)
S3_SECRET_KEY = Setting.text(
    "S3_SECRET_KEY", "", secret=True, help="S3 secret key; empty: the AWS credential chain."
)
S3_BUCKET = Setting(
    "S3_BUCKET",
    "smriti-memory",
    bucket_name,
    help="Bucket of the S3 backup; objects live under `{user}/`.",
)
SETTINGS = (S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET)
