"""``smriti hooks install|uninstall claude-code`` and ``smriti capture``: what the user
says in Claude Code sessions, remembered without the agent calling a tool.

The installed hook runs ``smriti capture --from claude-code --hook`` when a session ends
and before a compaction. Claude Code hands it the event as JSON on stdin; the hook
starts a detached ``smriti capture --from claude-code TRANSCRIPT`` and returns at once
with exit code 0 whatever happens, so it never blocks or fails the session. The capture
imports the transcript's user turns as the ``claude-code`` importer does (one memory per
turn, each following the one before, origin ``import:claude-code``, duplicates merged
and secrets screened as any store does them); each turn's memory id is fixed by the
transcript, so capturing the same transcript again adds only the turns that are new.
Its outcome, and anything that went wrong, goes to ``capture.log`` in the user's store
directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smriti.cli import output
from smriti.cli.commands import load_settings, open_memory
from smriti.errors import InvalidInput

#: The most hook input read from stdin (the event JSON is a few hundred bytes).
MAX_HOOK_INPUT = 1 << 20
#: The global flags a hook command carries, so the capture opens the store it was
#: installed for whatever the environment Claude Code runs it in.
_CARRIED = (("user", "--user"), ("storage", "--storage"), ("db_type", "--db-type"))


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti hooks`` and ``smriti capture`` on ``sub``."""
    p = sub.add_parser(
        "hooks",
        parents=[common],
        help="install or remove the hook that captures Claude Code sessions",
        description="Add to (or remove from) Claude Code's settings a hook that, when a "
        "session ends and before a compaction, stores what you said in the session as "
        "memories. The settings file is ~/.claude/settings.json ($CLAUDE_CONFIG_DIR when "
        "set); the rest of it is kept as it is.",
    )
    actions = p.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)
    for name, text in (("install", "add the hook"), ("uninstall", "remove the hook")):
        action = actions.add_parser(name, parents=[common], help=text)
        action.add_argument("client", choices=("claude-code",), help="the client: claude-code")
        action.add_argument(
            "--settings", default="", help="the settings file (default: Claude Code's own)"
        )
        if name == "install":
            action.add_argument(
                "--command",
                default="",
                help="how the hook starts Smriti, e.g. 'uvx smriti-server' (default: this "
                "smriti's full path)",
            )
        action.add_argument("--json", action="store_true", help="print JSON for scripts")
        action.set_defaults(handler=install if name == "install" else uninstall)
    c = sub.add_parser(
        "capture",
        parents=[common],
        help="store what the user said in a Claude Code session transcript",
        description="Import the user's turns of a Claude Code transcript (one memory per "
        "turn, in order). Run by the installed hook with --hook (the event JSON on stdin; "
        "the capture runs detached and the hook always succeeds), or by hand with a "
        "transcript path. Capturing a transcript again adds only its new turns.",
    )
    c.add_argument("--from", dest="from_format", choices=("claude-code",), required=True)
    c.add_argument("transcript", metavar="TRANSCRIPT", nargs="?", default="")
    c.add_argument("--hook", action="store_true", help="read the hook's event JSON on stdin")
    c.add_argument("--json", action="store_true", help="print JSON for scripts")
    c.set_defaults(handler=capture)


def _settings_file(args: argparse.Namespace) -> Path:
    from smriti.importers.claude_settings import settings_path

    return Path(args.settings).expanduser() if args.settings else settings_path()


def hook_command(args: argparse.Namespace) -> str:
    """The shell command the hook runs: this smriti (or ``--command``), ``capture
    --from claude-code --hook`` and the store flags given or set in the environment."""
    from smriti.importers.claude_settings import CAPTURE_MARK

    launcher = args.command.strip() if args.command else _this_smriti()
    parts = [f"{flag} {_quote(str(getattr(args, name)))}" for name, flag in _carried(args)]
    return " ".join([launcher, CAPTURE_MARK, *parts])


def _carried(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The store flags to carry: given on this command line, else from the environment
    (a storage path made absolute: the hook runs in the session's directory)."""
    env = {"user": "ACCESSING_USER", "storage": "STORAGE_LOCATION", "db_type": "DB_TYPE"}
    for name, variable in env.items():
        if getattr(args, name, None) is None and os.environ.get(variable, "").strip():
            setattr(args, name, os.environ[variable].strip())
    if getattr(args, "storage", None):
        args.storage = str(Path(args.storage).expanduser().resolve())
    if getattr(args, "user", None):
        from smriti.backend import validate_user

        validate_user(args.user)  # refused now, not in every session's capture.log
    return [(name, flag) for name, flag in _CARRIED if getattr(args, name, None)]


def _this_smriti() -> str:
    """This program, by a path that still works from another directory."""
    script = Path(sys.argv[0])
    if script.stem == "smriti" and script.exists():
        return _quote(str(script.resolve()))
    return f"{_quote(sys.executable)} -m smriti"


def _quote(text: str) -> str:
    return subprocess.list2cmdline([text]) if os.name == "nt" else shlex.quote(text)


def install(args: argparse.Namespace) -> int:
    """Add the capture hook to Claude Code's settings (again: brought up to date)."""
    from smriti.importers import claude_settings

    path = _settings_file(args)
    settings = claude_settings.read(path)  # refuses a broken file before anything changes
    command = hook_command(args)
    changed = claude_settings.add_hook(settings, command, path)
    if changed:
        claude_settings.write(path, settings)
    report = {"settings": str(path), "command": command, "events": list(claude_settings.EVENTS),
              "changed": changed}  # fmt: skip
    output.emit(report, args.json, _format_install)
    return 0


def _format_install(d: dict[str, Any]) -> str:
    state = "installed" if d["changed"] else "already installed"
    return (
        f"Claude Code capture hook {state} in {d['settings']} ({', '.join(d['events'])}).\n"
        f"It runs: {d['command']}\n"
        "Turn it off with: smriti hooks uninstall claude-code"
    )


def uninstall(args: argparse.Namespace) -> int:
    """Remove the capture hook from Claude Code's settings, leaving the rest as it was."""
    from smriti.importers import claude_settings

    path = _settings_file(args)
    settings = claude_settings.read(path)
    removed = claude_settings.remove_hook(settings, path)
    if removed:
        claude_settings.write(path, settings)
    report = {"settings": str(path), "removed": removed}
    output.emit(report, args.json, _format_uninstall)
    return 0


def _format_uninstall(d: dict[str, Any]) -> str:
    if not d["removed"]:
        return f"No Smriti hook was in {d['settings']}; nothing changed."
    return f"Removed the Smriti capture hook from {d['settings']} ({', '.join(d['removed'])})."


def capture(args: argparse.Namespace) -> int:
    """``--hook``: start the capture detached and succeed; else capture the transcript."""
    if args.hook:
        return _from_hook(args)
    if not args.transcript:
        raise InvalidInput("give the transcript to capture, or --hook to read the hook's event")
    from smriti.requests import ImportFromRequest

    path = Path(args.transcript).expanduser()
    if not path.is_file():
        raise InvalidInput(f"{path}: no such transcript file")
    request = ImportFromRequest.parse("claude-code", str(path.resolve()))
    with open_memory(args, "capture") as memory:
        report = memory.run(request)
    output.emit(report, args.json, _format_capture)
    return 0


def _format_capture(d: dict[str, Any]) -> str:
    return (
        f"captured {d['path']}: {d['stored']} new turn(s), {d['already_there']} already "
        f"captured, {d['merged']} merged into similar memories, {d['rejected_count']} unreadable"
    )


def _from_hook(args: argparse.Namespace) -> int:
    """The hook's side: never fails the session. Reads the event, starts the capture in
    its own session with its output in capture.log, and returns 0."""
    log: Path | None = None
    try:
        settings = load_settings(args)
        from smriti.private import open_private, private_dir

        folder = settings.user_dir()
        private_dir(folder)
        log = folder / "capture.log"
        transcript = _transcript(sys.stdin.read(MAX_HOOK_INPUT))
        with open_private(log, "ab") as sink:
            sink.write(_line(f"capturing {transcript}"))
            subprocess.Popen(
                [sys.executable, "-m", "smriti", *_flags(args), "capture", "--from",
                 "claude-code", str(transcript)],
                stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, **_detached(),
            )  # fmt: skip
    except Exception as exc:  # the session must go on whatever went wrong here
        _note(log, f"capture not started: {exc}")
    return 0


def _transcript(raw: str) -> Path:
    """The transcript the hook event names; ValueError saying what is wrong."""
    try:
        event = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError("the hook's input is not JSON") from None
    path = event.get("transcript_path") if isinstance(event, dict) else None
    if not isinstance(path, str) or not path.strip():
        raise ValueError("the hook's input has no transcript_path")
    transcript = Path(path).expanduser()
    if not transcript.is_file():
        raise ValueError(f"{transcript}: no such transcript file")
    return transcript.resolve()


def _flags(args: argparse.Namespace) -> list[str]:
    return [part for name, flag in _CARRIED if getattr(args, name, None)
            for part in (flag, str(getattr(args, name)))]  # fmt: skip


def _detached() -> dict[str, Any]:
    """Popen options that let the capture outlive the hook and Claude Code's session."""
    if os.name == "nt":
        flags = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS  # type: ignore[attr-defined]
        return {"creationflags": flags}
    return {"start_new_session": True}


def _line(text: str) -> bytes:
    return f"{datetime.now(UTC).isoformat(timespec='seconds')} {text}\n".encode()


def _note(log: Path | None, text: str) -> None:
    """Say what went wrong in capture.log (or on stderr, which Claude Code shows in its
    debug output, when the store's directory is not known)."""
    try:
        if log is None:
            raise OSError
        from smriti.private import open_private

        with open_private(log, "ab") as sink:
            sink.write(_line(text))
    except Exception:
        print(f"smriti capture: {text}", file=sys.stderr)
