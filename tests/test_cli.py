"""The ``smriti`` command line, run as a subprocess exactly as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SECRET_VARS = ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No API keys, storage and HOME inside the test's directory."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in SECRET_VARS and k not in {"ACCESSING_USER", "DB_TYPE", "LOG_LEVEL"}
    }
    clean.update(
        STORAGE_LOCATION=str(tmp_path / "store"),
        ACCESSING_USER="cli-user",
        HOME=str(tmp_path / "home"),
        BACKUP_TYPE="none",
    )
    return clean


def smriti(
    env: dict[str, str], *args: str, stdin: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "smriti", *args],
        env={**env, **extra},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _is_log_record(line: str) -> bool:
    try:
        return "level" in json.loads(line)
    except ValueError:
        return False


def one_error_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The single error line on stderr (structured log records aside)."""
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines() if not _is_log_record(line)]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("smriti: error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


def test_store_recall_forget_stats_with_json(env: dict[str, str]) -> None:
    stored = ok_json(
        smriti(env, "store", "Ravi's cat is called Biscuit", "--tags", "pets, ravi", "--json")
    )
    assert stored["tags"] == ["pets", "ravi"] and stored["importance"] == 0.5
    piped = ok_json(
        smriti(env, "store", "-", "--importance", "0.9", "--json", stdin="from stdin\n")
    )
    assert piped["importance"] == pytest.approx(0.9)

    recalled = ok_json(smriti(env, "recall", "Ravi cat", "--json"))
    assert recalled["mode"] == "recall"
    assert recalled["results"][0]["id"] == stored["id"]
    assert recalled["results"][0]["content"] == "Ravi's cat is called Biscuit"
    listed = ok_json(smriti(env, "recall", "--json", "--limit", "10"))
    assert listed["mode"] == "list"
    assert {r["id"] for r in listed["results"]} == {stored["id"], piped["id"]}
    assert [r["content"] for r in listed["results"] if r["id"] == piped["id"]] == ["from stdin"]

    stats = ok_json(smriti(env, "stats", "--json"))
    assert stats["user"] == "cli-user" and stats["backend"] == "kuzu"

    forgotten = ok_json(smriti(env, "forget", stored["id"], "--json"))
    assert forgotten["id"] == stored["id"]
    again = smriti(env, "forget", stored["id"])
    assert stored["id"] in one_error_line(again, 1)
    left = ok_json(smriti(env, "recall", "--json", "--limit", "10"))
    assert [r["id"] for r in left["results"]] == [piped["id"]]


def test_readable_output(env: dict[str, str]) -> None:
    stored = smriti(env, "store", "Standup moved to 9:30 on Mondays", "--tags", "work")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.startswith("stored ")
    recalled = smriti(env, "recall", "standup Monday")
    assert recalled.returncode == 0, recalled.stderr
    header, first = recalled.stdout.splitlines()[:2]
    assert header.split() == ["SCORE", "MATCH", "HOP", "ID", "MEMORY"]
    assert first.index(first.split()[3]) == header.index("ID")  # columns aligned
    assert "Standup moved to 9:30" in first
    stats = smriti(env, "stats")
    assert "backend" in stats.stdout and "kuzu" in stats.stdout
    empty = smriti(env, "--user", "nobody", "recall", "anything")
    assert empty.stdout.strip() == "no memories found"


def test_global_flags_before_or_after_the_command(env: dict[str, str], tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    ok_json(smriti(env, "--storage", str(other), "store", "x marks the spot", "--json"))
    ok_json(smriti(env, "store", "y too", "--user", "flag-user", "--storage", str(other), "--json"))
    assert {"cli-user", "flag-user"} <= {p.name for p in other.iterdir()}


def test_plugins_lists_distributions_and_registrations(env: dict[str, str]) -> None:
    data = ok_json(smriti(env, "plugins", "--json"))
    by_name = {p["name"]: p for p in data["plugins"]}
    kuzu = by_name["smriti-backend-kuzu"]
    assert kuzu["distribution"] == "smriti-backend-kuzu"
    assert kuzu["version"] != "?"
    assert "kuzu" in kuzu["registers"]["backend"]
    registered = {k for p in data["plugins"] for k in p["registers"]}
    assert {"backend", "embedder", "extractor", "backup"} <= registered
    assert isinstance(data["failures"], dict)
    text = smriti(env, "plugins")
    assert text.returncode == 0
    assert text.stdout.splitlines()[0].split() == ["PLUGIN", "DISTRIBUTION", "VERSION", "REGISTERS"]
    assert "smriti-backend-kuzu" in text.stdout


@pytest.mark.parametrize(
    "user", ["../x", "a/b", "it's", 'say"hi', "x" * 1000, "", ".hidden", "a\\b", "-rf"]
)
def test_bad_user_flag_is_a_usage_error_and_creates_nothing(
    env: dict[str, str], tmp_path: Path, user: str
) -> None:
    before = sorted(tmp_path.rglob("*"))
    result = smriti(env, f"--user={user}", "store", "should not be stored")
    assert "ACCESSING_USER" in one_error_line(result, 2)
    assert result.stdout == ""
    assert sorted(tmp_path.rglob("*")) == before
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("user", ["../x", "a/b", "x" * 1000])
def test_bad_accessing_user_variable(env: dict[str, str], tmp_path: Path, user: str) -> None:
    result = smriti(env, "recall", "anything", ACCESSING_USER=user)
    assert "ACCESSING_USER" in one_error_line(result, 2)
    assert not (tmp_path / "store").exists() and not (tmp_path / "x").exists()


def test_bad_user_also_stops_the_server(env: dict[str, str], tmp_path: Path) -> None:
    result = smriti(env, stdin="", ACCESSING_USER="../escape")
    assert "ACCESSING_USER" in one_error_line(result, 2)
    assert result.stdout == ""
    assert not (tmp_path / "escape").exists()


def test_unknown_db_type_lists_installed_backends(env: dict[str, str]) -> None:
    line = one_error_line(smriti(env, "stats", DB_TYPE="nosuchdb"), 2)
    assert "DB_TYPE='nosuchdb'" in line and "kuzu" in line and "installed" in line


def test_missing_backend_plugin_gives_pip_install_hint(env: dict[str, str]) -> None:
    result = smriti(env, "stats", DB_TYPE="neo4j", SMRITI_DISABLE_PLUGINS="smriti-backend-neo4j")
    line = one_error_line(result, 2)
    assert "pip install 'smriti[neo4j]'" in line and "kuzu" in line


def test_malformed_setting_is_one_line(env: dict[str, str]) -> None:
    line = one_error_line(smriti(env, "stats", CONSOLIDATION_INTERVAL="soon"), 2)
    assert "CONSOLIDATION_INTERVAL" in line


@pytest.mark.parametrize(
    "args",
    [
        ("store", "x", "--importance", "abc"),
        ("store", "x", "--importance", "nan"),
        ("store", "x", "--importance", "1.5"),
        ("recall", "x", "--limit", "0"),
        ("recall", "x", "--mode", "telepathy"),
        ("serve", "--transport", "carrier-pigeon"),
    ],
)
def test_bad_arguments_exit_2(env: dict[str, str], tmp_path: Path, args: tuple[str, ...]) -> None:
    result = smriti(env, *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "store").exists()


def test_empty_content_is_a_usage_error(env: dict[str, str]) -> None:
    assert "content" in one_error_line(smriti(env, "store", "   "), 2)


def test_help_is_fast_and_lazy() -> None:
    probe = (
        "import sys, smriti.cli; "
        "heavy = [m for m in ('smriti.engine', 'mcp', 'kuzu', 'openai') if m in sys.modules]; "
        "print(heavy)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "smriti", "--help"], capture_output=True, text=True, timeout=30
    )
    assert helped.returncode == 0 and "recall" in helped.stdout
