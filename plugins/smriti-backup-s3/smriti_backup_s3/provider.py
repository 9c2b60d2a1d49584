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

Two machines never overwrite each other: the snapshot is written with S3 conditional
writes (``If-Match`` the ETag that was fetched and merged, or ``If-None-Match: *`` when
there was none); a lost race is a SnapshotConflict, and the engine merges the newer
snapshot before it tries again. Stores that ignore these headers (older MinIO or Ceph
releases) fall back to last-writer-wins.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti import BackupError, BackupProvider, Fetched, SnapshotConflict, SyncReport, get_logger
from smriti.backend import open_private, private_dir
from smriti_backup_s3.settings import S3_BUCKET, S3_ENDPOINT, S3_REGION, SETTINGS

if TYPE_CHECKING:
    from smriti import Settings

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
#: A conditional write lost: the object changed (412), or a concurrent conditional
#: write is in progress (409, AWS).
CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})
SNAPSHOT = "memory.jsonl"


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
    declared_settings = SETTINGS
    #: Keys per ``list_objects_v2`` page (S3's maximum is 1000).
    page_size = 1000

    def __init__(self, settings: Settings, user: str) -> None:
        super().__init__(settings, user)
        #: This provider's settings by variable (``settings.SETTINGS``), validated.
        self.options = {s.env: s.read(settings.env) for s in SETTINGS}
        self.bucket: str = self.options[S3_BUCKET.env]
        self.prefix = f"{user}/"
        # user info in an endpoint URL (``https://key:secret@host``) never reaches a message
        shown = self.options[S3_ENDPOINT.env] or "AWS S3"
        self.endpoint = re.sub(r"//[^/@\s]+@", "//***@", shown)
        self._client: Any = None

    # -- the contract ----------------------------------------------------------------
    def location(self) -> str:
        """``s3://{bucket}/{user}/memory.jsonl at {endpoint}``."""
        return f"s3://{self.bucket}/{self.prefix}{SNAPSHOT} at {self.endpoint}"

    def restore(self, target: Path) -> bool:
        """Download every object under ``{user}/`` into ``target``; False when none."""
        return self.fetch(target, None).downloaded

    def fetch(self, target: Path, known: str | None) -> Fetched:
        """List ``{user}/``; download its files unless the snapshot's ETag is ``known``.

        The version (and the base of ``push_if``) is the ETag of ``memory.jsonl``, taken
        from the GET that downloaded it, so it names exactly the bytes merged."""
        listing = self._call("list the backup", self._list)
        etag = listing.get(self.prefix + SNAPSHOT)
        if not listing or (etag is not None and etag == known):
            if not listing:
                log.info("s3 backup is empty: nothing to restore", bucket=self.bucket,
                         prefix=self.prefix)  # fmt: skip
            return Fetched(self.location(), etag, False, etag)
        private_dir(target)
        for key in sorted(listing):
            name = key[len(self.prefix) :]
            if not name or "/" in name or name in (".", ".."):
                continue  # only the flat snapshot files this provider writes
            got = self._call(f"download {key}", self._download, key, target / name)
            if name == SNAPSHOT:
                etag = got
        log.info("s3 backup fetched", bucket=self.bucket, files=len(listing))
        return Fetched(self.location(), etag, True, etag)

    def push(self, snapshot: Path) -> SyncReport:
        """Upload changed snapshot files (last writer wins); unchanged ones are skipped."""
        etag = self._call("list the backup", self._list).get(self.prefix + SNAPSHOT)
        return self._upload(snapshot, None, etag)

    def push_if(self, snapshot: Path, fetched: Fetched) -> SyncReport:
        """Upload ``memory.jsonl`` only if the object still has the fetched ETag
        (``If-Match``), or still does not exist (``If-None-Match: *``); otherwise raise
        SnapshotConflict. Other files are uploaded as by ``push``."""
        return self._upload(snapshot, fetched, fetched.base)

    def _upload(self, snapshot: Path, fetched: Fetched | None, etag: str | None) -> SyncReport:
        self._ensure_bucket()
        report = SyncReport(self.name, version=etag)
        for path in sorted(p for p in snapshot.iterdir() if p.is_file()):
            key = self.prefix + path.name
            md5 = file_md5(path)
            if self._remote_md5(key) == md5:
                report.skipped += 1
                continue
            if path.name == SNAPSHOT:
                report.version = self._put(path, key, md5, fetched, etag)
            else:
                self._call(f"upload {key}", self.client.upload_file, str(path), self.bucket,
                           key, ExtraArgs={"Metadata": {MD5_META: md5}})  # fmt: skip
            report.pushed.append(key)
        report.message = (
            f"uploaded {len(report.pushed)} file(s) to s3://{self.bucket}/{self.prefix}"
            if report.pushed
            else "nothing to push: the snapshot is unchanged"
        )
        return report

    def _put(
        self, path: Path, key: str, md5: str, fetched: Fetched | None, etag: str | None
    ) -> str | None:
        """One PUT of the snapshot, conditional when ``fetched`` is given; its new ETag."""
        condition: dict[str, str] = {}
        if fetched is not None:
            condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            with path.open("rb") as body:
                done = self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=body, Metadata={MD5_META: md5}, **condition
                )
        except Exception as exc:
            if _code(exc) in CONFLICT_CODES:
                log.info("s3 snapshot changed since it was fetched; merging it first", key=key)
                raise SnapshotConflict(f"{self.location()} changed since it was fetched") from exc
            raise self._error(f"upload {key}", exc) from exc
        return str(done.get("ETag", "")).strip('"') or None

    def _download(self, key: str, path: Path) -> str:
        """GET ``key`` into ``path`` (streamed); return the ETag of the bytes written."""
        got = self.client.get_object(Bucket=self.bucket, Key=key)
        with open_private(path, "wb") as out:
            for chunk in got["Body"].iter_chunks(CHUNK):
                out.write(chunk)
        return str(got.get("ETag", "")).strip('"')

    def purge(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        """Scrub the memories out of the current snapshot object (replaced when it
        still held them), then delete every older version and delete marker under the
        user's prefix: in a versioned bucket each older version is an earlier snapshot,
        and S3 cannot rewrite one, only delete it. Other users' prefixes are untouched."""
        key = self.prefix + SNAPSHOT
        replaced = self._call(f"scrub {key}", self._scrub_current, key, list(memory_ids))
        deleted = self._call("delete the older versions", self._delete_old_versions)
        log.warning("s3 backup purged of memories", bucket=self.bucket, prefix=self.prefix,
                    replaced=replaced, versions_deleted=deleted)  # fmt: skip
        return {
            "replaced": replaced,
            "versions_deleted": deleted,
            "message": f"s3://{self.bucket}/{self.prefix}: {deleted} older version(s) deleted",
            "warning": "copies made outside this bucket (replicas, downloads, other "
            "backups of it) are not erased",
        }

    def _scrub_current(self, key: str, ids: list[str]) -> bool:
        """Replace the current snapshot by its scrubbed text when it holds ``ids``."""
        from smriti import scrub

        try:
            got = self.client.get_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _code(exc) in MISSING_CODES:
                return False
            raise
        cleaned = scrub(got["Body"].read().decode("utf-8"), ids)
        if cleaned is None:
            return False
        body = cleaned.encode("utf-8")
        md5 = hashlib.md5(body, usedforsecurity=False).hexdigest()
        self.client.put_object(Bucket=self.bucket, Key=key, Body=body, Metadata={MD5_META: md5})
        return True

    def _delete_old_versions(self) -> int:
        """Delete every non-current version and delete marker under the prefix."""
        paginator = self.client.get_paginator("list_object_versions")
        doomed: list[dict[str, str]] = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
            old = [v for v in page.get("Versions", []) if not v.get("IsLatest")]
            # every delete marker too: the versions under it are gone with the rest
            for entry in [*old, *page.get("DeleteMarkers", [])]:
                doomed.append({"Key": entry["Key"], "VersionId": entry["VersionId"]})
        for start in range(0, len(doomed), 1000):  # DeleteObjects takes 1,000 at most
            batch = doomed[start : start + 1000]
            done = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch})
            if done.get("Errors"):
                first = done["Errors"][0]
                raise BackupError(
                    f"cannot delete {first.get('Key')} version {first.get('VersionId')} in "
                    f"s3://{self.bucket}: {first.get('Code')} {first.get('Message')}; the "
                    "credentials need s3:DeleteObjectVersion"
                )
        return len(doomed)

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

        endpoint, region, access_key, secret_key = (
            self.options[name]
            for name in ("S3_ENDPOINT", "S3_REGION", "S3_ACCESS_KEY", "S3_SECRET_KEY")
        )
        options: dict[str, Any] = {}
        if endpoint:
            options["endpoint_url"] = endpoint
        if region:
            options["region_name"] = region
        if access_key or secret_key:
            options["aws_access_key_id"] = access_key
            options["aws_secret_access_key"] = secret_key
        config = Config(
            connect_timeout=10,
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path"} if endpoint else {},
        )
        return boto3.session.Session().client("s3", config=config, **options)

    def _list(self) -> dict[str, str]:
        """Key → ETag of every object under the user's prefix (paginated)."""
        paginator = self.client.get_paginator("list_objects_v2")
        keys: dict[str, str] = {}
        try:
            for page in paginator.paginate(
                Bucket=self.bucket,
                Prefix=self.prefix,
                PaginationConfig={"PageSize": self.page_size},
            ):
                for obj in page.get("Contents", []):
                    keys[obj["Key"]] = str(obj.get("ETag", "")).strip('"')
        except Exception as exc:
            if _code(exc) in MISSING_CODES:
                return {}
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
        region = self.options[S3_REGION.env]
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
