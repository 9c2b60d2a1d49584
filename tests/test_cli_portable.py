"""``smriti export``, ``import``, ``hash`` and ``sync`` run as a user runs them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from smriti.testing.console import console_env
from smriti.testing.console import json_ok as ok
from smriti.testing.console import run as smriti


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No API keys; storage, HOME and a git backup remote inside the test's directory."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    return {**console_env(tmp_path), "GIT_BASE_URL": str(remote)}


def test_export_import_hash(env: dict[str, str], tmp_path: Path) -> None:
    for text in (
        "alice drinks espresso every morning",
        "espresso needs a fine grinder",
        "the grinder broke on monday",
    ):
        ok(smriti(env, "store", text, "--json"))
    path = tmp_path / "alice.jsonl.gz"
    exported = ok(smriti(env, "export", str(path), "--json"))
    assert exported["counts"]["engrams"] == 3 and path.stat().st_size == exported["bytes"]
    imported = ok(smriti(env, "import", str(path), "--json", ACCESSING_USER="bob"))
    assert imported["counts"] == exported["counts"] and imported["source_user"] == "alice"
    alice = ok(smriti(env, "hash", "--json"))
    bob = ok(smriti(env, "hash", "--json", ACCESSING_USER="bob"))
    assert alice["canonical_hash"] == bob["canonical_hash"] and bob["engrams"] == 3
    again = smriti(env, "import", str(path), ACCESSING_USER="bob")
    assert again.returncode == 2 and "already holds 3 memories" in again.stderr
    assert "Traceback" not in again.stderr
    merged = ok(smriti(env, "import", str(path), "--merge", "--json", ACCESSING_USER="bob"))
    assert merged["counts"]["engrams"] == 3


def test_import_of_a_broken_file_is_one_error_line(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    result = smriti(env, "import", str(bad))
    assert result.returncode == 2 and "is not a Smriti export" in result.stderr
    assert "Traceback" not in result.stderr


def test_sync_reports_what_was_pushed(env: dict[str, str], tmp_path: Path) -> None:
    git_env = {**env, "BACKUP_TYPE": "git"}
    ok(smriti(env, "store", "a memory worth backing up", "--json"))  # no backup yet
    first = ok(smriti(git_env, "sync", "--json"))
    assert first["provider"] == "git" and first["pushed"] == ["alice/memory.jsonl"]
    assert "pushed commit" in first["message"]
    ok(smriti(git_env, "store", "stored with the backup on", "--json"))  # pushed at close
    second = smriti(git_env, "sync")
    assert second.returncode == 0 and "nothing to push" in second.stdout
    restored = ok(smriti(git_env, "stats", "--json", STORAGE_LOCATION=str(tmp_path / "new")))
    assert restored["engrams"] == 2
