"""The S3 provider against moto's S3 server (real HTTP, real boto3) on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import smriti_backup_s3.plugin as s3_plugin
from moto.server import ThreadedMotoServer
from smriti_backup_s3.provider import S3Backup
from structlog.testing import capture_logs

from smriti import BackupError, ConfigError
from smriti.config import Settings
from smriti.engine.components import check_plugin_settings
from smriti.plugins import Registry, create_plugin_manager
from smriti.testing.backup_suite import (
    SNAPSHOT,
    BackupProviderTests,
    EngineBackupTests,
    memory_texts,
    read_dir,
    write_snapshot,
)

KEY, SECRET = "testing-key", "testing-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_url() -> Iterator[str]:
    """The endpoint URL of a moto S3 server running for the whole session."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def bucket() -> str:
    """A fresh, valid bucket name per test (the provider creates it)."""
    return f"smriti-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def s3(s3_url: str) -> Any:
    """A plain boto3 client on the moto server, for inspecting what the provider did."""
    return boto3.client(
        "s3",
        endpoint_url=s3_url,
        region_name="us-east-1",
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
    )


def s3_overrides(url: str, bucket: str, **more: Any) -> dict[str, Any]:
    return {
        "s3_endpoint": url,
        "s3_region": "us-east-1",
        "s3_access_key": KEY,
        "s3_secret_key": SECRET,
        "s3_bucket": bucket,
        **more,
    }


def make_provider(
    tmp_path: Path, url: str, bucket: str, user: str = "alice", **more: Any
) -> S3Backup:
    settings = Settings.from_env(
        {}, storage_location=str(tmp_path / "home"), **s3_overrides(url, bucket, **more)
    )
    return S3Backup(settings, user)


@pytest.fixture
def enforce_auth(s3_url_iam: Any) -> Iterator[tuple[str, str]]:
    """Turn on moto's IAM authentication (the server runs in this process); yields a
    valid (key, secret) pair."""
    from moto import settings as moto_settings
    from moto.core.responses import ActionAuthenticatorMixin

    keys = s3_url_iam()
    previous = moto_settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield keys
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = previous


@pytest.fixture
def s3_url_iam(s3_url: str) -> Any:
    """``create()`` → (key, secret) of a new IAM user allowed to use S3."""

    def create() -> tuple[str, str]:
        iam = boto3.client(
            "iam",
            endpoint_url=s3_url,
            region_name="us-east-1",
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
        )
        name = f"smriti-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=name)
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName=name, PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    return create


class ObjectVersions:
    """Every stored version of the objects under a prefix (a versioned bucket)."""

    def __init__(self, s3: Any, bucket: str, prefix: str) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix

    def texts(self) -> list[bytes]:
        pages = self.s3.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        versions = [v for page in pages for v in page.get("Versions", [])]
        return [
            bytes(self.s3.get_object(
                Bucket=self.bucket, Key=v["Key"], VersionId=v["VersionId"]
            )["Body"].read())
            for v in versions
        ]  # fmt: skip


class RemoteObject:
    """Reads or replaces one object of the bucket, as a person with an S3 client would."""

    def __init__(self, s3: Any, bucket: str, key: str) -> None:
        self.s3, self.bucket, self.key = s3, bucket, key

    def read(self) -> bytes | None:
        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=self.key)["Body"].read())
        except self.s3.exceptions.NoSuchKey:
            return None

    def write(self, data: bytes | None) -> None:
        if data is None:
            self.s3.delete_object(Bucket=self.bucket, Key=self.key)
        else:
            self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=data)


class TestS3Conformance(BackupProviderTests):
    @pytest.fixture
    def provider_factory(self, tmp_path: Path, s3_url: str, bucket: str) -> Any:
        made: list[S3Backup] = []

        def make(overrides: dict[str, Any] | None = None, user: str = "alice") -> S3Backup:
            values = {
                "storage_location": str(tmp_path / "home"),
                **s3_overrides(s3_url, bucket),
                **(overrides or {}),
            }
            provider = S3Backup(Settings.from_env({}, **values), user)
            made.append(provider)
            return provider

        yield make
        for provider in made:
            provider.close()

    @pytest.fixture
    def unreachable_overrides(self) -> dict[str, Any]:
        return {"s3_endpoint": f"http://127.0.0.1:{free_port()}"}


class TestS3ThroughTheEngine(EngineBackupTests):
    @pytest.fixture
    def backup_plugin(self) -> Any:
        return s3_plugin

    @pytest.fixture
    def backup_overrides(self, s3_url: str, bucket: str) -> dict[str, Any]:
        return {"backup_type": "s3", **s3_overrides(s3_url, bucket)}

    @pytest.fixture
    def unreachable_backup_overrides(self, bucket: str) -> dict[str, Any]:
        return {"backup_type": "s3", **s3_overrides(f"http://127.0.0.1:{free_port()}", bucket)}

    @pytest.fixture
    def remote_snapshot(self, s3: Any, bucket: str) -> Any:
        return RemoteObject(s3, bucket, f"alice/{SNAPSHOT}")

    @pytest.fixture
    def remote_history(self, s3: Any, bucket: str) -> Any:
        """Every version of every object under alice/, in a bucket with versioning on."""
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        return ObjectVersions(s3, bucket, "alice/")

    def test_rejected_credentials_keep_the_engine_serving(
        self,
        make_engine: Any,
        backup_overrides: dict[str, Any],
        enforce_auth: tuple[str, str],
    ) -> None:
        wrong = {**backup_overrides, "s3_access_key": "AKIAWRONG", "s3_secret_key": "nope-123"}
        with capture_logs() as logs, make_engine(wrong) as engine:
            for text in memory_texts(5):
                engine.store(text)
            with pytest.raises(BackupError, match="credentials were rejected"):
                engine.sync()
            assert engine.backend.count_engrams() == 5
        events = " ".join(str(e) for e in logs)
        assert "restore failed" in events and "nope-123" not in events


def test_registered_as_s3() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(s3_plugin)
    assert Registry(pm).get("backup", "s3", "BACKUP_TYPE") is S3Backup


@pytest.mark.parametrize("name", ["alice_smriti", "Smriti", "ab", "-smriti", "a..b", "1.2.3.4"])
def test_invalid_bucket_names_fail_at_startup(name: str) -> None:
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(s3_plugin)
    settings = Settings.from_env({"S3_BUCKET": name})  # the core does not know S3_BUCKET
    with pytest.raises(ConfigError, match="S3_BUCKET=.* is not a valid S3 bucket name"):
        check_plugin_settings(Registry(pm), settings)  # what the engine does at startup
    with pytest.raises(ConfigError, match="S3_BUCKET=.* is not a valid S3 bucket name"):
        S3Backup(settings, "alice")


def test_default_bucket_name_is_valid() -> None:
    assert S3Backup(Settings.from_env({}), "alice").bucket == "smriti-memory"


def test_bucket_is_created_and_keys_are_prefixed_by_user(
    tmp_path: Path, s3_url: str, bucket: str, s3: Any
) -> None:
    provider = make_provider(tmp_path, s3_url, bucket)
    provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"hello\n"}))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["alice/memory.jsonl"]


def test_restore_follows_pagination(tmp_path: Path, s3_url: str, bucket: str, s3: Any) -> None:
    s3.create_bucket(Bucket=bucket)
    for i in range(24):
        s3.put_object(Bucket=bucket, Key=f"alice/part-{i:04d}", Body=str(i).encode())
    s3.put_object(Bucket=bucket, Key="alice/memory.jsonl", Body=b"last\n")
    s3.put_object(Bucket=bucket, Key="bob/memory.jsonl", Body=b"not alice's\n")
    provider = make_provider(tmp_path, s3_url, bucket)
    provider.page_size = 10  # three pages: a provider that ignores continuation gets 10
    target = tmp_path / "restore"
    assert provider.restore(target) is True
    files = read_dir(target)
    assert len(files) == 25 and files["memory.jsonl"] == b"last\n"
    assert files["part-0023"] == b"23"


def test_single_part_object_from_elsewhere_is_compared_by_etag(
    tmp_path: Path, s3_url: str, bucket: str, s3: Any
) -> None:
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="alice/memory.jsonl", Body=b"same bytes\n")
    report = make_provider(tmp_path, s3_url, bucket).push(
        write_snapshot(tmp_path / "snap", {SNAPSHOT: b"same bytes\n"})
    )
    assert report.pushed == [] and report.skipped == 1


def test_credentials_from_settings_are_used(
    tmp_path: Path, s3_url: str, bucket: str, enforce_auth: tuple[str, str]
) -> None:
    key, secret = enforce_auth
    good = make_provider(tmp_path, s3_url, bucket, s3_access_key=key, s3_secret_key=secret)
    assert good.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"x\n"})).pushed
    bad = make_provider(tmp_path, s3_url, bucket, s3_access_key=key, s3_secret_key="wrong-zzz")
    with pytest.raises(BackupError, match="credentials were rejected") as info:
        bad.restore(tmp_path / "restore")
    assert "wrong-zzz" not in str(info.value)


def test_unreachable_endpoint_message(tmp_path: Path, bucket: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BackupError, match=f"the S3 endpoint {url} is unreachable"):
        make_provider(tmp_path, url, bucket).push(
            write_snapshot(tmp_path / "snap", {SNAPSHOT: b"x\n"})
        )


def test_user_info_in_the_endpoint_never_reaches_a_message(tmp_path: Path, bucket: str) -> None:
    url = f"http://someone:hunter2@127.0.0.1:{free_port()}"
    provider = make_provider(tmp_path, url, bucket)
    assert "hunter2" not in provider.location()
    with pytest.raises(BackupError) as info:
        provider.restore(tmp_path / "restore")
    assert "hunter2" not in str(info.value)
