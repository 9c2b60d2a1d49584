"""Smriti's capture hook in Claude Code's settings file, added and removed.

Claude Code reads hooks from ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR`` when set):
``{"hooks": {EVENT: [{"matcher": ..., "hooks": [{"type": "command", "command": ...}]}]}}``.
Smriti adds one command hook to ``SessionEnd`` (the session is over) and to ``PreCompact``
(the conversation is about to be summarised), both running ``smriti capture --hook``,
which reads the event's JSON (with ``transcript_path``) on stdin. Everything else in the
file is kept as it is; Smriti's entries are found again by ``CAPTURE_MARK`` in their
command, so installing twice adds nothing and uninstalling removes only them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from smriti.errors import InvalidInput

__all__ = ["CAPTURE_MARK", "EVENTS", "add_hook", "remove_hook", "settings_path", "write"]

#: The events whose hook hands the transcript to ``smriti capture``.
EVENTS = ("SessionEnd", "PreCompact")
#: What identifies Smriti's hook command among the user's own hooks.
CAPTURE_MARK = "capture --from claude-code --hook"
#: Seconds Claude Code lets the hook run; it returns at once (the capture is detached).
HOOK_TIMEOUT = 30


def settings_path() -> Path:
    """The user's Claude Code settings file."""
    base = os.environ.get("CLAUDE_CONFIG_DIR", "").strip()
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "settings.json"


def read(path: Path) -> dict[str, Any]:
    """The settings in ``path`` ({} when there is none); InvalidInput, changing nothing,
    when the file is not a JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}); fix it first, "
            "nothing was changed"
        ) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{path} is not a JSON object; fix it first, nothing was changed")
    return value


def _event_list(settings: dict[str, Any], event: str, path: Path) -> list[Any]:
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: 'hooks' is not an object; fix it first, nothing was changed")
    entries = hooks.setdefault(event, [])
    if not isinstance(entries, list):
        raise InvalidInput(
            f"{path}: hooks.{event} is not a list; fix it first, nothing was changed"
        )
    return entries


def _is_ours(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    inner = entry.get("hooks")
    return isinstance(inner, list) and any(
        isinstance(h, dict) and CAPTURE_MARK in str(h.get("command", "")) for h in inner
    )


def add_hook(settings: dict[str, Any], command: str, path: Path) -> list[str]:
    """Add (or bring up to date) Smriti's hook running ``command`` on every event of
    ``EVENTS``; the events whose entry changed."""
    changed = []
    entry = {"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]}
    for event in EVENTS:
        entries = _event_list(settings, event, path)
        mine = [e for e in entries if _is_ours(e)]
        if mine == [entry]:
            continue
        entries[:] = [e for e in entries if not _is_ours(e)] + [entry]
        changed.append(event)
    return changed


def remove_hook(settings: dict[str, Any], path: Path) -> list[str]:
    """Remove Smriti's hook from every event; the events it was on. An event left with
    no hook, and ``hooks`` left empty, are removed too."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return []
    removed = []
    for event in EVENTS:
        entries = hooks.get(event)
        if not isinstance(entries, list) or not any(_is_ours(e) for e in entries):
            continue
        kept = [e for e in entries if not _is_ours(e)]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
        removed.append(event)
    if not hooks:
        del settings["hooks"]
    return removed


def write(path: Path, settings: dict[str, Any]) -> None:
    """Replace ``path`` with ``settings`` atomically, keeping the file's mode: Claude Code
    may read it at any moment, and a half-written file would lose the user's settings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    partial = path.with_name(f".{path.name}.smriti-{os.getpid()}")
    data = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
