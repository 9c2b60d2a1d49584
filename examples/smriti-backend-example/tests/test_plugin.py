"""The example as a user meets it: installed through its entry point, chosen by
``DB_TYPE=jsonfile``, its setting validated and shown, its probe run by ``smriti doctor``,
all through the real ``smriti`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Settings of the developer's shell that would change what these runs do.
_CLEARED = ("DB_TYPE", "SMRITI_JSONFILE_FSYNC", "LLM_API_KEY", "OPENAI_API_KEY", "BACKUP_TYPE")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    clean.update(
        STORAGE_LOCATION=str(tmp_path / "store"),
        ACCESSING_USER="ex-user",
        DB_TYPE="jsonfile",
        SMRITI_EMBEDDER="lexical",
        SMRITI_OWNER="off",
        HOME=str(tmp_path / "home"),
    )
    return clean


def smriti(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "smriti", *args],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_installed_backend_stores_and_recalls_in_its_file(env: dict[str, str]) -> None:
    stored = smriti(env, "store", "The walrus sleeps on the ice floe")
    assert stored.returncode == 0, stored.stderr
    path = Path(env["STORAGE_LOCATION"]) / "ex-user" / "memory.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [e["content"] for e in data["engrams"]] == ["The walrus sleeps on the ice floe"]
    found = smriti(env, "recall", "walrus", "--json")
    assert found.returncode == 0, found.stderr
    assert "The walrus sleeps on the ice floe" in found.stdout


def test_a_bad_value_of_its_setting_stops_the_start_naming_it(env: dict[str, str]) -> None:
    result = smriti(env, "store", "anything", SMRITI_JSONFILE_FSYNC="sometimes")
    assert result.returncode != 0
    assert "SMRITI_JSONFILE_FSYNC='sometimes' is invalid (allowed: on, off)" in result.stderr
    assert not (Path(env["STORAGE_LOCATION"]) / "ex-user" / "memory.json").exists()


def checks(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def test_doctor_shows_its_setting_and_runs_its_probe(env: dict[str, str]) -> None:
    fresh = smriti(env, "doctor", "--json", SMRITI_JSONFILE_FSYNC="off")
    assert fresh.returncode == 0, fresh.stdout
    rows = {r["name"]: r for r in json.loads(fresh.stdout)["settings"]}
    assert (rows["SMRITI_JSONFILE_FSYNC"]["value"], rows["SMRITI_JSONFILE_FSYNC"]["origin"]) == (
        "off",
        "env",
    )
    assert checks(fresh)["jsonfile store"]["status"] == "ok"
    assert "created on first use" in checks(fresh)["jsonfile store"]["detail"]
    path = Path(env["STORAGE_LOCATION"]) / "ex-user" / "memory.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json", encoding="utf-8")
    broken = smriti(env, "doctor", "--json", SMRITI_JSONFILE_FSYNC="never")
    assert broken.returncode == 1
    got = checks(broken)
    assert got["setting SMRITI_JSONFILE_FSYNC"]["status"] == "fail"
    assert got["jsonfile store"]["status"] == "fail"
    assert "move it away" in got["jsonfile store"]["fix"]
