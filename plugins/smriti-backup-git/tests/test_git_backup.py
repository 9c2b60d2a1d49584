"""The git provider against the system git, with a bare repository in tmp_path as the remote."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import smriti_backup_git.plugin as git_plugin
from smriti_backup_git.git import redact
from smriti_backup_git.provider import GitBackup, remote_url

from smriti import BackupError, ConfigError
from smriti.config import Settings
from smriti.plugins import Registry, create_plugin_manager
from smriti.testing.backup_suite import (
    SNAPSHOT,
    BackupProviderTests,
    EngineBackupTests,
    memory_texts,
    read_dir,
    write_snapshot,
)


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git in a test (argument list, no shell) and return its stdout."""
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def bare_repo(path: Path, branch: str = "main") -> Path:
    """An empty bare repository whose HEAD points at ``branch``."""
    git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(path))
    return path


def make_settings(home: Path, remote: str, **overrides: Any) -> Settings:
    return Settings.from_env(
        {}, storage_location=str(home), backup_type="git", git_base_url=remote, **overrides
    )


class RemoteFile:
    """Reads or replaces one file of the remote's branch, as a person with git would."""

    def __init__(self, remote: Path, work: Path, path: str, branch: str = "main") -> None:
        self.remote, self.work, self.path, self.branch = remote, work, path, branch

    def read(self) -> bytes | None:
        proc = subprocess.run(
            ["git", "show", f"{self.branch}:{self.path}"], cwd=self.remote, capture_output=True
        )
        return proc.stdout if proc.returncode == 0 else None

    def write(self, data: bytes | None) -> None:
        if not self.work.exists():
            git("clone", "--quiet", "--branch", self.branch, str(self.remote), str(self.work))
        git("pull", "--quiet", "origin", self.branch, cwd=self.work)
        target = self.work / self.path
        if data is None:
            git("rm", "--quiet", self.path, cwd=self.work)
        else:
            target.write_bytes(data)
            git("add", self.path, cwd=self.work)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "edit", cwd=self.work)
        git("push", "--quiet", "origin", f"HEAD:{self.branch}", cwd=self.work)


class GitObjects:
    """Every object a purge must have cleaned: those reachable in the bare remote (``git
    rev-list --all --objects``) and every object of the local working copy, reachable
    or not (``--batch-all-objects``, after the purge's gc)."""

    def __init__(self, remote: Path, local: Path) -> None:
        self.remote, self.local = remote, local

    def texts(self) -> list[bytes]:
        listed = git("rev-list", "--all", "--objects", cwd=self.remote).split("\n")
        out = [self._cat(self.remote, line.split(" ")[0]) for line in listed if line]
        if (self.local / ".git").is_dir():
            every = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)",
                        cwd=self.local).split()  # fmt: skip
            out += [self._cat(self.local, sha) for sha in every]
        return out

    @staticmethod
    def _cat(repo: Path, sha: str) -> bytes:
        done = subprocess.run(["git", "cat-file", "-p", sha], cwd=repo, capture_output=True)
        return done.stdout


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_repo(tmp_path / "remote.git")


class TestGitConformance(BackupProviderTests):
    large_snapshot_bytes = 3 * 1024 * 1024

    @pytest.fixture
    def provider_factory(self, tmp_path: Path, remote: Path) -> Any:
        def make(overrides: dict[str, Any] | None = None, user: str = "alice") -> GitBackup:
            values = {
                "storage_location": str(tmp_path / "home"),
                "git_base_url": str(remote),
                **(overrides or {}),
            }
            return GitBackup(Settings.from_env({}, **values), user)

        return make

    @pytest.fixture
    def unreachable_overrides(self, tmp_path: Path) -> dict[str, Any]:
        return {"git_base_url": str(tmp_path / "missing" / "nowhere.git")}


class TestGitThroughTheEngine(EngineBackupTests):
    @pytest.fixture
    def backup_plugin(self) -> Any:
        return git_plugin

    @pytest.fixture
    def backup_overrides(self, remote: Path) -> dict[str, Any]:
        return {"backup_type": "git", "git_base_url": remote.as_uri()}

    @pytest.fixture
    def unreachable_backup_overrides(self, tmp_path: Path) -> dict[str, Any]:
        return {"backup_type": "git", "git_base_url": (tmp_path / "gone.git").as_uri()}

    @pytest.fixture
    def remote_snapshot(self, remote: Path, tmp_path: Path) -> Any:
        return RemoteFile(remote, tmp_path / "hand-edit", f"alice/{SNAPSHOT}")

    @pytest.fixture
    def remote_history(self, remote: Path, tmp_path: Path) -> Any:
        return GitObjects(remote, tmp_path / "home" / "alice" / "backup-git")

    def test_a_restore_missed_at_startup_is_merged_before_the_next_push(
        self, make_engine: Any, backup_overrides: dict[str, Any], remote: Path, tmp_path: Path
    ) -> None:
        with make_engine(backup_overrides) as first:
            for text in memory_texts(5):
                first.store(text)
            first.sync()
        away = remote.rename(tmp_path / "away.git")  # the remote is unreachable ...
        elsewhere = {**backup_overrides, "storage_location": str(tmp_path / "laptop")}
        laptop = make_engine(elsewhere).open()
        try:
            assert laptop.backend.count_engrams() == 0
            laptop.store("written on the laptop while offline")
            away.rename(remote)  # ... and back
            report = laptop.sync()
            assert report.pushed
            assert laptop.backend.count_engrams() == 6, "the remote's memories were not merged"
        finally:
            laptop.close()
        fresh = {**backup_overrides, "storage_location": str(tmp_path / "fresh")}
        with make_engine(fresh) as restored:
            assert restored.backend.count_engrams() == 6

    def test_restore_uses_the_branch_pushed_to_when_the_remote_head_points_elsewhere(
        self, make_engine: Any, backup_overrides: dict[str, Any], remote: Path, tmp_path: Path
    ) -> None:
        with make_engine(backup_overrides) as first:
            for text in memory_texts(5):
                first.store(text)
            first.sync()
        seed = tmp_path / "seed"  # someone adds a docs branch and makes it the default
        git("init", "--quiet", "--initial-branch=docs", str(seed))
        (seed / "README").write_text("my notes\n")
        git("add", "README", cwd=seed)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "docs", cwd=seed)
        git("push", "--quiet", str(remote), "HEAD:refs/heads/docs", cwd=seed)
        git("symbolic-ref", "HEAD", "refs/heads/docs", cwd=remote)
        laptop = {**backup_overrides, "storage_location": str(tmp_path / "laptop")}
        with make_engine(laptop) as restored:
            assert restored.backend.count_engrams() == 5, "restored from the remote's HEAD"
            restored.store("written on the laptop")
            report = restored.sync()
            assert "(main)" in report.message
        assert git("ls-tree", "-r", "--name-only", "docs", cwd=remote).split() == ["README"]
        fresh = {**backup_overrides, "storage_location": str(tmp_path / "fresh")}
        with make_engine(fresh) as again:
            assert again.backend.count_engrams() == 6


def test_registered_as_git_and_github() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(git_plugin)
    registry = Registry(pm)
    assert registry.get("backup", "git", "BACKUP_TYPE") is GitBackup
    assert registry.get("backup", "github", "BACKUP_TYPE") is GitBackup


def test_remote_url_full_or_base() -> None:
    assert remote_url("https://example.org/me/memory.git", "alice") == (
        "https://example.org/me/memory.git"
    )
    assert remote_url("https://github.com/me/", "alice") == (
        "https://github.com/me/alice-smriti.git"
    )
    assert remote_url("git@github.com:me", "bob") == "git@github.com:me/bob-smriti.git"
    with pytest.raises(ConfigError, match="GIT_BASE_URL"):
        remote_url("  ", "alice")


def test_base_url_selects_the_users_repository(tmp_path: Path) -> None:
    bare_repo(tmp_path / "remotes" / "alice-smriti.git")
    provider = GitBackup(make_settings(tmp_path / "home", str(tmp_path / "remotes")), "alice")
    provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"x\n"}))
    files = git(
        "ls-tree", "-r", "--name-only", "main", cwd=tmp_path / "remotes" / "alice-smriti.git"
    )
    assert files.split() == ["alice/memory.jsonl"]


def test_branch_is_detected_from_the_remote_not_hard_coded(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    remote = bare_repo(tmp_path / "trunk.git", branch="trunk")
    git("clone", "--quiet", str(remote), str(seed))
    (seed / "README").write_text("existing project\n")
    git("add", "README", cwd=seed)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed", cwd=seed)
    git("push", "--quiet", "origin", "HEAD:trunk", cwd=seed)
    provider = GitBackup(make_settings(tmp_path / "home", str(remote)), "alice")
    provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"on trunk\n"}))
    assert git("branch", "--format=%(refname:short)", cwd=remote).split() == ["trunk"]
    tree = git("ls-tree", "-r", "--name-only", "trunk", cwd=remote).split()
    assert tree == ["README", "alice/memory.jsonl"], "the existing history was not kept"


def test_empty_remote_gets_the_default_branch(tmp_path: Path, remote: Path) -> None:
    provider = GitBackup(make_settings(tmp_path / "home", str(remote)), "alice")
    provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"first\n"}))
    heads = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=remote).split()
    assert heads == ["main"]


def test_no_empty_commits(tmp_path: Path, remote: Path) -> None:
    provider = GitBackup(make_settings(tmp_path / "home", str(remote)), "alice")
    snap = write_snapshot(tmp_path / "snap", {SNAPSHOT: b"same\n"})
    for _ in range(3):
        provider.push(snap)
    assert git("rev-list", "--count", "main", cwd=remote).strip() == "1"
    report = provider.push(snap)
    assert report.pushed == [] and "nothing to push" in report.message


def test_rejected_push_is_a_clear_backup_error(tmp_path: Path, remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'quota exceeded' >&2\nexit 1\n")
    hook.chmod(0o755)
    provider = GitBackup(make_settings(tmp_path / "home", str(remote)), "alice")
    with pytest.raises(BackupError, match="git push to .* failed: .*quota exceeded"):
        provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"x\n"}))


def test_credentials_never_appear_in_errors(tmp_path: Path) -> None:
    url = "http://alice:s3cr3t-token@127.0.0.1:9/memory.git"
    provider = GitBackup(make_settings(tmp_path / "home", url, accessing_user="alice"), "alice")
    with pytest.raises(BackupError) as info:
        provider.restore(tmp_path / "target")
    assert "s3cr3t-token" not in str(info.value)
    assert "http://***@127.0.0.1:9/memory.git" in str(info.value)


def test_redact_removes_userinfo() -> None:
    text = "fatal: unable to access 'https://bob:tok@github.com/x.git/': 403"
    assert redact(text) == "fatal: unable to access 'https://***@github.com/x.git/': 403"


def test_restore_keeps_local_snapshot_commits_that_were_not_pushed(
    tmp_path: Path, remote: Path
) -> None:
    provider = GitBackup(make_settings(tmp_path / "home", str(remote)), "alice")
    provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: b"v1\n"}))
    other = GitBackup(make_settings(tmp_path / "other", str(remote)), "alice")
    other.push(write_snapshot(tmp_path / "snap2", {SNAPSHOT: b"v2\n"}))
    target = tmp_path / "target"
    assert provider.restore(target) is True
    assert read_dir(target) == {SNAPSHOT: b"v2\n"}
