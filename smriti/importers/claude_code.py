"""Reader for Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Followed: the transcript JSON Lines Claude Code 2.x writes (entries carrying ``version``
"2.0.74" to "2.1.37"); Anthropic publishes no schema, so the shape is the one its files
have: one object per line with ``type`` ("user", "assistant", "summary",
"file-history-snapshot", "queue-operation", ...), ``uuid``, ``parentUuid``, ``sessionId``,
``timestamp`` (ISO 8601, UTC) and, for turns, ``message: {role, content}`` where
``content`` is a string or a list of blocks (``text``, ``tool_result``, ``image``, ...).

Only what the user said becomes a memory: ``type: "user"`` entries whose content has text.
Left out, because the user did not type them: tool results (the agent's tool output comes
back as "user" entries), ``isMeta`` entries (hook feedback, caveats), ``isSidechain``
entries (a sub-agent's prompts), ``isCompactSummary`` entries (the summary a compaction
writes), slash-command wrappers (``<command-name>``, ``<local-command-stdout>``), ``!``
shell commands and their output (``<bash-input>``, ``<bash-stdout>``) and the
"[Request interrupted by user]" marker. Each turn keeps its timestamp as ``occurred_at``
and follows the session's previous turn (the ``follows`` relation the store links
conversation turns with). A path may be one transcript or a folder of them (every
``*.jsonl`` below it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected

__all__ = ["read"]

EXPECTED = (
    "a Claude Code transcript: JSON Lines of objects with a 'type' field, as in "
    "~/.claude/projects/<project>/<session>.jsonl"
)
#: Text Claude Code itself puts in a "user" entry: slash commands and their output.
_WRAPPERS = (
    "<command-name>",
    "<command-message>",
    "<local-command-",
    "<bash-",  # a `!` shell command and its output
    "Caveat: ",
    "[Request interrupted by user",
)
#: The relation the store links one conversation turn to the one before it with.
FOLLOWS = "follows"


def read(path: Path) -> Iterator[Imported | Rejected]:
    """The user's turns in one transcript, or in every ``*.jsonl`` under a folder.

    Raises InvalidInput when ``path`` is neither, or a single file is not a transcript;
    in a folder, a file that is not a transcript is reported as Rejected.
    """
    if path.is_dir():
        files = sorted(path.rglob("*.jsonl"))
        if not files:
            raise InvalidInput(f"{path} holds no *.jsonl files; expected {EXPECTED}")
        for file in files:
            try:
                yield from _read_file(file, f"{file.relative_to(path)}: ")
            except InvalidInput as error:
                yield Rejected(str(file.relative_to(path)), str(error))
        return
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist; expected {EXPECTED}")
    yield from _read_file(path, "")


def _read_file(path: Path, prefix: str) -> Iterator[Imported | Rejected]:
    previous: dict[str, str] = {}  # session id -> key of its last turn
    checked = False
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            entry = _entry(line)
            if not checked:
                # The first record decides whether this is a transcript at all.
                if entry is None or not isinstance(entry.get("type"), str):
                    raise InvalidInput(f"{path} is not {EXPECTED}")
                checked = True
            if entry is None:
                yield Rejected(f"{prefix}line {number}", "not a JSON object")
                continue
            yield from _turn(entry, f"{prefix}line {number}", previous)
    if not checked:
        raise InvalidInput(f"{path} is empty; expected {EXPECTED}")


def _entry(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _turn(
    entry: dict[str, Any], where: str, previous: dict[str, str]
) -> Iterator[Imported | Rejected]:
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain"):
        return
    if entry.get("isCompactSummary"):
        return
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("role") != "user":
        yield Rejected(where, "a 'user' entry without a user message")
        return
    text = _text(message.get("content"))
    if not text or text.startswith(_WRAPPERS):
        return
    when = _moment(entry.get("timestamp"))
    if when is None:
        yield Rejected(where, f"timestamp {entry.get('timestamp')!r} is not an ISO 8601 time")
        return
    session = str(entry.get("sessionId") or "")
    key = f"turn:{session}:{entry.get('uuid') or where}"
    links = ((previous[session], FOLLOWS),) if session in previous else ()
    previous[session] = key
    yield Imported(key, text, tags=("claude-code",), occurred_at=when, links=links)


def _text(content: object) -> str:
    """The typed text of a message's content: a string, or its ``text`` blocks joined."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts = [
        block["text"].strip()
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n\n".join(p for p in parts if p)


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(UTC)
