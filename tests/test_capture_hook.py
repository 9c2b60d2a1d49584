"""The Claude Code capture hook, end to end: ``smriti hooks install claude-code`` writes
the hook into a real settings file beside the user's own settings, the installed command
is run as Claude Code runs it (through the shell, the event JSON on stdin), the detached
capture stores the session's user turns, a second run adds only the new turn, a broken
event never fails the hook, and ``uninstall`` gives back the file as it was."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from smriti.testing.console import console_env
from smriti.testing.console import json_ok as ok
from smriti.testing.console import run as smriti

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell hook commands")

SAMPLE = Path(__file__).parent / "data" / "importers" / "claude-code-session.jsonl"
SESSION = "5f0c1d2e-8a4b-4c6d-9e1f-2a3b4c5d6e7f"
#: The user's own settings, which the hook must leave as they are.
USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye >/dev/null"}]}],
    },
}
#: Seconds to wait for a detached capture to finish (it starts an owner and a model).
WAIT = 180


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return console_env(tmp_path, user="asha", drop=("CLAUDE_CONFIG_DIR",))


def run_hook(command: str, event: object, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the installed hook command as Claude Code does: a shell, the event on stdin,
    an environment without Smriti's settings (the command carries them)."""
    bare = {k: v for k, v in env.items() if k not in ("STORAGE_LOCATION", "ACCESSING_USER")}
    stdin = event if isinstance(event, str) else json.dumps(event)
    return subprocess.run(
        command, shell=True, input=stdin, env=bare, capture_output=True, text=True, timeout=60
    )


def wait_for_captures(log: Path, count: int) -> str:
    """capture.log once it reports ``count`` finished captures."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.count("captured ") >= count or "error" in text:
            return text
        time.sleep(0.5)
    raise AssertionError(f"no finished capture in {WAIT} s:\n{text}")


def memories(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    listed = ok(smriti(env, "recall", "--mode", "list", "--limit", "100", "--json"))
    return {m["content"]: m for m in listed["results"]}


def event(transcript: Path, name: str) -> dict[str, str]:
    return {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": "/home/asha/code/tide",
        "hook_event_name": name,
    }


def test_the_installed_hook_captures_a_session_and_then_only_its_new_turns(
    env: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(USER_SETTINGS, indent=2))
    installed = ok(smriti(env, "hooks", "install", "claude-code", "--json"))
    assert installed["changed"] == ["SessionEnd", "PreCompact"]
    written = json.loads(settings.read_text())
    assert written["model"] == "opus" and written["permissions"] == USER_SETTINGS["permissions"]
    assert written["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert written["hooks"]["SessionEnd"][0] == USER_SETTINGS["hooks"]["SessionEnd"][0]
    command = written["hooks"]["PreCompact"][0]["hooks"][0]["command"]
    assert written["hooks"]["SessionEnd"][1]["hooks"][0]["command"] == command
    assert "--user asha" in command and str(tmp_path / "store") in command
    assert ok(smriti(env, "hooks", "install", "claude-code", "--json"))["changed"] == []

    transcript = tmp_path / "project" / f"{SESSION}.jsonl"
    transcript.parent.mkdir()
    transcript.write_bytes(SAMPLE.read_bytes())
    hooked = run_hook(command, event(transcript, "PreCompact"), env)
    assert (hooked.returncode, hooked.stdout) == (0, "")
    log = tmp_path / "store" / "asha" / "capture.log"
    assert "3 new turn(s)" in wait_for_captures(log, 1)
    stored = memories(env)
    assert len(stored) == 3
    assert {m["origin"] for m in stored.values()} == {"import:claude-code"}
    asha = stored["Also: my name is Asha and I review every PR on Fridays."]
    assert asha["created_at"] == "2026-01-20T12:03:41.555000+00:00"

    # The session goes on; at its end the hook runs again and adds the new turn only.
    turn = {
        "parentUuid": "a9", "isSidechain": False, "userType": "external", "type": "user",
        "sessionId": SESSION, "version": "2.1.12", "uuid": "u99",
        "timestamp": "2026-01-20T12:30:00.000Z",
        "message": {"role": "user", "content": "Ship the gauge parser on Monday."},
    }  # fmt: skip
    with transcript.open("a") as handle:
        handle.write(json.dumps(turn) + "\n")
    assert run_hook(command, event(transcript, "SessionEnd"), env).returncode == 0
    assert "1 new turn(s), 3 already captured" in wait_for_captures(log, 2)
    stored = memories(env)
    assert len(stored) == 4
    last = stored["Ship the gauge parser on Monday."]
    related = ok(smriti(env, "related", last["id"], "--json"))["related"]
    assert (stored["Use the staging bucket s3://tide-staging for test uploads."]["id"],
            "follows") in {(r["id"], r["relation"]) for r in related}  # fmt: skip

    # A broken event, a missing transcript: the hook still succeeds, the log says why.
    for bad in ("not json", {"session_id": SESSION}, event(tmp_path / "gone.jsonl", "x")):
        broken = run_hook(command, bad, env)
        assert (broken.returncode, broken.stdout) == (0, "")
    notes = log.read_text()
    assert "the hook's input is not JSON" in notes
    assert "the hook's input has no transcript_path" in notes
    assert "gone.jsonl: no such transcript file" in notes
    assert len(memories(env)) == 4

    removed = ok(smriti(env, "hooks", "uninstall", "claude-code", "--json"))
    assert removed["removed"] == ["SessionEnd", "PreCompact"]
    assert json.loads(settings.read_text()) == USER_SETTINGS
    again = ok(smriti(env, "hooks", "uninstall", "claude-code", "--json"))
    assert again["removed"] == []


def test_install_refuses_a_broken_settings_file_and_changes_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus",, }')
    refused = smriti(env, "hooks", "install", "claude-code", "--settings", str(settings))
    assert refused.returncode == 2
    assert "is not valid JSON (line 1" in refused.stderr and "nothing was changed" in refused.stderr
    assert settings.read_text() == '{"model": "opus",, }'

    # CLAUDE_CONFIG_DIR is where Claude Code keeps its settings when set; a new file
    # is created private to the user.
    config = tmp_path / "config"
    made = ok(smriti({**env, "CLAUDE_CONFIG_DIR": str(config)}, "hooks", "install",
                     "claude-code", "--command", "uvx smriti-server", "--json"))  # fmt: skip
    assert made["settings"] == str(config / "settings.json")
    assert made["command"].startswith("uvx smriti-server capture --from claude-code --hook")
    assert (config / "settings.json").stat().st_mode & 0o777 == 0o600


def test_capture_by_hand_names_what_is_missing(env: dict[str, str], tmp_path: Path) -> None:
    missing = smriti(env, "capture", "--from", "claude-code", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "no such transcript file" in missing.stderr
    bare = smriti(env, "capture", "--from", "claude-code")
    assert bare.returncode == 2 and "give the transcript to capture" in bare.stderr
    done = ok(smriti(env, "capture", "--from", "claude-code", str(SAMPLE), "--json"))
    assert (done["stored"], done["rejected_count"]) == (3, 2)
