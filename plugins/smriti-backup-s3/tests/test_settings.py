"""The S3 backup's settings are its own: declared on the provider, read from the
environment the core passes, part of what an owner process is started with."""

from __future__ import annotations

from smriti_backup_s3 import plugin as s3_plugin
from smriti_backup_s3.provider import S3Backup
from smriti_backup_s3.settings import S3_BUCKET, S3_SECRET_KEY

from smriti.config import Settings, settings_table
from smriti.owner.spawn import differences, fingerprint
from smriti.plugins import Registry, create_plugin_manager


def test_the_provider_declares_and_reads_its_settings() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(s3_plugin, name="smriti-backup-s3")
    declared = dict((s.env, p) for p, s in Registry(pm).declared_settings())
    assert declared["S3_BUCKET"] == declared["S3_SECRET_KEY"] == "smriti-backup-s3"
    assert S3_SECRET_KEY.secret and not S3_BUCKET.secret
    assert "S3_BUCKET" not in dict(settings_table())  # not a core setting any more
    settings = Settings.from_env({"S3_BUCKET": "team.memories", "S3_REGION": "eu-west-1"})
    provider = S3Backup(settings, "alice")
    assert provider.bucket == "team.memories" and provider.options["S3_REGION"] == "eu-west-1"


def test_an_owner_started_with_other_s3_settings_is_told_apart() -> None:
    mine = fingerprint(Settings.from_env({"S3_BUCKET": "one", "S3_SECRET_KEY": "very-secret-1"}))
    assert mine["S3_BUCKET"] == "one"
    assert mine["S3_SECRET_KEY"].startswith("secret:") and "very-secret-1" not in str(mine)
    other = fingerprint(Settings.from_env({"S3_BUCKET": "two", "S3_SECRET_KEY": "very-secret-2"}))
    assert differences(mine, other) == ["S3_BUCKET", "S3_SECRET_KEY"]
