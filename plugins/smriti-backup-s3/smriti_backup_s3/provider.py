"""The S3 backup provider: snapshot files under ``{user}/`` in an S3-compatible bucket.

Settings: ``S3_ENDPOINT`` (empty = AWS), ``S3_REGION``, ``S3_ACCESS_KEY`` and
``S3_SECRET_KEY`` (both empty = boto3's default credential chain: environment, shared
config, instance role), ``S3_BUCKET`` (default ``smriti-memory``, validated at startup:
3–63 lower-case letters, digits, ``-`` or ``.``). With a custom endpoint (MinIO, Ceph,
R2, moto) path-style addressing is used.

Push uploads each snapshot file to ``{user}/{name}`` unless the object already holds the
same bytes: the MD5 stored in the object's metadata (``x-amz-meta-md5``), or for objects
uploaded by others in one part the ETag, is compared with the local file's MD5. The
bucket is created on first push when it does not exist (and the credentials allow it).
Restore lists ``{user}/`` with the paginated ``list_objects_v2`` and downloads into the
directory it is given (a temporary one: the engine imports afterwards, so a live
database file is never overwritten).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.backup import BackupProvider, SyncReport
from smriti.errors import BackupError
from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.config import Settings

log = get_logger(__name__)

MD5_META = "md5"
CHUNK = 1 << 20
#: S3 error codes that mean "these credentials are wrong or not allowed".
AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "AuthorizationHeaderMalformed",
        "403",
    }
)
MISSING_CODES = frozenset({"NoSuchBucket", "404", "NotFound", "NoSuchKey"})


def file_md5(path: Path) -> str:
    """Hex MD5 of a file, read in chunks (memory stays flat for large snapshots)."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class S3Backup(BackupProvider):
    """Snapshots uploaded to ``s3://{S3_BUCKET}/{user}/``."""

    name = "s3"
    description = "snapshots in an S3-compatible bucket (S3_ENDPOINT, S3_BUCKET)"
    #: Keys per ``list_objects_v2`` page (S3's maximum is 1000).
    page_size = 1000

    def __init__(self, settings: Settings, user: str) -> None:
        super().__init__(settings, user)
        self.bucket = settings.s3_bucket
        self.prefix = f"{user}/"
        self.endpoint = settings.s3_endpoint or "AWS S3"
        self._client: Any = None

    # -- the contract ----------------------------------------------------------------
    def restore(self, target: Path) -> bool:
        """Download every object under ``{user}/`` into ``target``; False when none."""
        keys = self._call("list the backup", self._list)
        if not keys:
            log.info(
                "s3 backup is empty: nothing to restore", bucket=self.bucket, prefix=self.prefix
            )
            return False
        target.mkdir(parents=True, exist_ok=True)
        for key in keys:
            name = key[len(self.prefix) :]
            if not name or "/" in name or name in (".", ".."):
                continue  # only the flat snapshot files this provider writes
            self._call(
                f"download {key}", self.client.download_file, self.bucket, key, str(target / name)
            )
        log.info("s3 backup fetched", bucket=self.bucket, files=len(keys))
        return True

    def push(self, snapshot: Path) -> SyncReport:
        """Upload changed snapshot files; unchanged ones (same MD5) are skipped."""
        self._ensure_bucket()
        report = SyncReport(self.name)
        for path in sorted(p for p in snapshot.iterdir() if p.is_file()):
            key = self.prefix + path.name
            md5 = file_md5(path)
            if self._remote_md5(key) == md5:
                report.skipped += 1
                continue
            self._call(
                f"upload {key}",
                self.client.upload_file,
                str(path),
                self.bucket,
                key,
                ExtraArgs={"Metadata": {MD5_META: md5}},
            )
            report.pushed.append(key)
        report.message = (
            f"uploaded {len(report.pushed)} file(s) to s3://{self.bucket}/{self.prefix}"
            if report.pushed
            else "nothing to push: the snapshot is unchanged"
        )
        return report

    def close(self) -> None:
        """Drop the client (boto3 clients hold a connection pool)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- S3 ----------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The boto3 S3 client, created on first use."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        import boto3
        from botocore.config import Config

        s = self.settings
        options: dict[str, Any] = {}
        if s.s3_endpoint:
            options["endpoint_url"] = s.s3_endpoint
        if s.s3_region:
            options["region_name"] = s.s3_region
        if s.s3_access_key or s.s3_secret_key:
            options["aws_access_key_id"] = s.s3_access_key
            options["aws_secret_access_key"] = s.s3_secret_key
        config = Config(
            connect_timeout=10,
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path"} if s.s3_endpoint else {},
        )
        return boto3.session.Session().client("s3", config=config, **options)

    def _list(self) -> list[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        keys: list[str] = []
        try:
            for page in paginator.paginate(
                Bucket=self.bucket,
                Prefix=self.prefix,
                PaginationConfig={"PageSize": self.page_size},
            ):
                keys.extend(obj["Key"] for obj in page.get("Contents", []))
        except Exception as exc:
            if _code(exc) in MISSING_CODES:
                return []
            raise
        return keys

    def _remote_md5(self, key: str) -> str | None:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _code(exc) in MISSING_CODES:
                return None
            raise self._error(f"check {key}", exc) from exc
        stored = head.get("Metadata", {}).get(MD5_META)
        if stored:
            return str(stored)
        etag = str(head.get("ETag", "")).strip('"')
        return etag if "-" not in etag else None  # a multipart ETag is not an MD5

    def _ensure_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return
        except Exception as exc:
            if _code(exc) not in MISSING_CODES:
                raise self._error("open the bucket", exc) from exc
        options: dict[str, Any] = {"Bucket": self.bucket}
        region = self.settings.s3_region
        if region and region != "us-east-1":
            options["CreateBucketConfiguration"] = {"LocationConstraint": region}
        self._call("create the bucket", self.client.create_bucket, **options)
        log.info("s3 bucket created", bucket=self.bucket, endpoint=self.endpoint)

    def _call(self, action: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BackupError:
            raise
        except Exception as exc:
            raise self._error(action, exc) from exc

    def _error(self, action: str, exc: Exception) -> BackupError:
        """A BackupError a person can act on (never containing the secret key)."""
        where = f"s3://{self.bucket}/{self.prefix} at {self.endpoint}"
        code = _code(exc)
        kind = type(exc).__name__
        if kind == "NoCredentialsError":
            return BackupError(
                f"cannot {action}: no S3 credentials; set S3_ACCESS_KEY and S3_SECRET_KEY "
                "or configure the AWS credential chain"
            )
        if code in AUTH_CODES:
            return BackupError(
                f"cannot {action} in {where}: the credentials were rejected ({code}); check "
                "S3_ACCESS_KEY, S3_SECRET_KEY and the bucket's permissions"
            )
        if kind in (
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ReadTimeoutError",
            "ConnectionClosedError",
        ):
            return BackupError(f"cannot {action}: the S3 endpoint {self.endpoint} is unreachable")
        detail = " ".join(str(exc).split())[:300]
        return BackupError(f"cannot {action} in {where}: {detail}")


def _code(exc: Exception) -> str:
    """The S3 error code of a botocore ClientError ('' for other exceptions)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""
