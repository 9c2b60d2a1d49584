"""The ``smriti`` command line, run as a subprocess exactly as a user runs it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
        # the Hub is out of reach here: say so, rather than let each start find out
        HF_HUB_OFFLINE="1",
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


def test_store_with_occurred_at(env: dict[str, str]) -> None:
    stored = ok_json(
        smriti(env, "store", "We moved to Lisbon", "--occurred-at", "2021-03-04T10:00Z", "--json")
    )
    assert stored["created_at"] == "2021-03-04T10:00:00+00:00"
    assert "occurred_at" in one_error_line(smriti(env, "store", "x", "--occurred-at", "soon"), 2)


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
    assert stats["user"] == "cli-user" and stats["backend"] == "ladybug"  # a new store: LadybugDB

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
    assert header.split() == ["SCORE", "MATCH", "HOP", "ID", "ORIGIN", "MEMORY"]
    assert first.index(first.split()[3]) == header.index("ID")  # columns aligned
    assert first.split()[4] == "user"  # a CLI store is the user's own words
    assert "Standup moved to 9:30" in first
    stats = smriti(env, "stats")
    assert "backend" in stats.stdout and "ladybug" in stats.stdout
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
    assert "pip install 'smriti-server[neo4j]'" in line and "kuzu" in line


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


def _unreadable_command(path: Path) -> list[str]:
    """A command prefix under which ``path`` (mode 000) cannot be read, or skip."""
    path.chmod(0)
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to make a file unreadable")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("import", "{tmp}/nonexistent.jsonl"), "no such file"),
        (("import", "{tmp}"), "is a directory"),
        (("export", "{tmp}/nodir/x.jsonl"), "does not exist"),
        (("export", "{tmp}"), "is a directory"),
        (("export", "{tmp}/a-file/x.jsonl"), "is not a directory"),
        (("--storage", "{tmp}/a-file", "stats"), "is a file, not a directory"),
        (("--storage", "{tmp}/a-file/below", "recall", "x"), "is a file, not a directory"),
        (("--storage", "{tmp}/a-file", "serve"), "is a file, not a directory"),
        (("--storage", "{tmp}/users", "store", "x"), "must be the directory holding"),
        (("--storage", "{tmp}/users"), "must be the directory holding"),
    ],
)
def test_bad_paths_are_one_error_line(
    env: dict[str, str], tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "cli-user").write_text("a file where the user's store belongs\n")
    before = sorted(tmp_path.rglob("*"))
    result = smriti(env, *(a.format(tmp=tmp_path) for a in args), stdin="")
    assert expected in one_error_line(result, 2)
    assert result.stdout == ""
    assert sorted(tmp_path.rglob("*")) == before  # nothing created, not even the store


def test_unreadable_import_file_is_one_error_line(env: dict[str, str], tmp_path: Path) -> None:
    locked = tmp_path / "locked.jsonl"
    locked.write_text("{}\n")
    command = [*_unreadable_command(locked), sys.executable, "-m", "smriti", "import", str(locked)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert "cannot be read: permission denied" in one_error_line(result, 2)
    assert not (tmp_path / "store").exists()


def test_blank_accessing_user_stops_commands_and_server(env: dict[str, str]) -> None:
    for args in (("stats",), ()):
        result = smriti(env, *args, stdin="", ACCESSING_USER=" ")
        assert "ACCESSING_USER is set but empty" in one_error_line(result, 2)


def test_every_subcommand_has_a_description(env: dict[str, str]) -> None:
    from smriti.cli.parser import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {"store", "recall", "forget", "export", "import"} <= set(commands.choices)
    for name, sub in commands.choices.items():
        assert sub.description and len(sub.description) > 10, name
    helped = smriti(env, "export", "--help")
    assert helped.returncode == 0 and "versioned JSON Lines" in helped.stdout


def test_search_mode_has_a_similarity_floor(env: dict[str, str]) -> None:
    for text in ("Ravi's cat is called Biscuit", "The Lisbon office moved in March"):
        ok_json(smriti(env, "store", text, "--json"))
    found = ok_json(smriti(env, "recall", "Ravi cat", "--mode", "search", "--json"))
    assert [r["content"] for r in found["results"]] == ["Ravi's cat is called Biscuit"]
    assert all(r["score"] >= 0.2 for r in found["results"])
    unrelated = ok_json(smriti(env, "recall", "quantum zebra", "--mode", "search", "--json"))
    assert unrelated["results"] == [] and unrelated["degraded"] is False
    text = smriti(env, "recall", "quantum zebra", "--mode", "search")
    assert text.stdout.strip() == "no memories found"


def test_list_mode_shows_no_score(env: dict[str, str]) -> None:
    ok_json(smriti(env, "store", "Standup moved to 9:30 on Mondays", "--json"))
    listed = smriti(env, "recall", "--mode", "list")
    assert listed.returncode == 0, listed.stderr
    header, first = listed.stdout.splitlines()[:2]
    assert "SCORE" not in header and header.split()[-3:] == ["ID", "ORIGIN", "MEMORY"]
    assert "Standup moved" in first
    data = ok_json(smriti(env, "recall", "--json"))
    assert data["mode"] == "list" and [r["score"] for r in data["results"]] == [None]
    said = [(r["origin"], r["principal"], r["flags"]) for r in data["results"]]
    assert said == [("user", "", [])]


def test_get_correct_history_update_related(env: dict[str, str]) -> None:
    old = ok_json(smriti(env, "store", "Ravi's cat is called Biscuit", "--tags", "pets", "--json"))
    corrected = ok_json(
        smriti(
            env, "correct", old["id"], "Ravi's cat is called Mochi", "--json", "--importance", "0.7"
        )
    )
    new_id = corrected["new_id"]
    assert corrected["superseded"] == old["id"] and corrected["memory"]["tags"] == ["pets"]
    assert corrected["memory"]["importance"] == 0.7

    history = ok_json(smriti(env, "history", new_id, "--json"))
    assert [v["id"] for v in history["versions"]] == [old["id"], new_id]
    text = smriti(env, "history", old["id"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.split("\n")[0].split() == ["CREATED", "ID", "MEMORY"]
    assert text.stdout.index(old["id"]) < text.stdout.index(new_id)

    detail = ok_json(smriti(env, "get", new_id, "--json"))
    assert detail["memory"]["content"] == "Ravi's cat is called Mochi"
    assert detail["versions"] == [old["id"], new_id]
    shown = smriti(env, "get", old["id"])
    assert shown.returncode == 0, shown.stderr
    assert "superseded by" in shown.stdout and new_id in shown.stdout

    updated = ok_json(smriti(env, "update", new_id, "--tags", "pets, ravi", "--json"))
    assert updated["memory"]["tags"] == ["pets", "ravi"]
    assert updated["memory"]["importance"] == 0.7
    related = ok_json(smriti(env, "related", new_id, "--limit", "5", "--json"))
    assert {r["id"]: r["relation"] for r in related["related"]}[old["id"]] == "supersedes"

    refused = smriti(env, "correct", old["id"], "Ravi's cat is called Tofu")
    assert new_id in one_error_line(refused, 2)
    assert "--importance" in one_error_line(smriti(env, "update", new_id), 2)
    missing = smriti(env, "get", "no-such-id")
    assert "no-such-id" in one_error_line(missing, 1)
    listed = ok_json(smriti(env, "recall", "--json", "--include-superseded", "--limit", "10"))
    assert {r["id"] for r in listed["results"]} == {old["id"], new_id}


def test_recall_filters_and_cursor(env: dict[str, str]) -> None:
    for i, tags in enumerate(("a, b", "a", "b")):
        ok_json(
            smriti(
                env,
                "store",
                f"Filtered note number {i} about owls {i * 7}",
                "--tags",
                tags,
                "--json",
            )
        )
    both = ok_json(smriti(env, "recall", "--json", "--tags", "a,b", "--tag-match", "all"))
    assert [r["tags"] for r in both["results"]] == [["a", "b"]]
    anyof = ok_json(smriti(env, "recall", "--json", "--tags", "a", "--since", "2000-01-01"))
    assert len(anyof["results"]) == 2
    assert ok_json(smriti(env, "recall", "--json", "--until", "2000-01-01"))["results"] == []

    first = ok_json(smriti(env, "recall", "--json", "--limit", "2"))
    assert first["count"] == 2 and first["next_cursor"]
    rest = ok_json(
        smriti(env, "recall", "--json", "--limit", "2", "--cursor", first["next_cursor"])
    )
    assert rest["count"] == 1 and rest["next_cursor"] is None
    ids = [r["id"] for r in first["results"] + rest["results"]]
    assert len(set(ids)) == 3
    text = smriti(env, "recall", "--limit", "2")
    assert f"--cursor {first['next_cursor']}" in text.stdout

    assert "since" in one_error_line(smriti(env, "recall", "--since", "someday"), 2)
    assert "cursor" in one_error_line(smriti(env, "recall", "--cursor", "garbage"), 2)
