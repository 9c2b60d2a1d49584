"""The team server's access record: who stored, recalled or forgot what, and who was
refused, as JSON lines in a private file.

One line per tool call and per refused request::

    {"time": "2026-12-05T14:01:02.123456+00:00", "principal": "key:3f9c0a1b2c4d",
     "user": "bob", "client": "10.0.0.7:53122", "tool": "smriti_manage",
     "action": "forget", "memory_ids": ["0b7e..."], "outcome": "ok"}

Refusals have ``"event": "refused"``, the HTTP ``status`` and a short ``reason``
(never the token: a refused API key is named by its id only). Never any content: no
memory text, no query, no tags, no token. The file is ``SMRITI_AUDIT_LOG`` (default
``{STORAGE_LOCATION}/.audit.jsonl`` on a server with authentication, ``off`` for none),
created with mode 0600 and only ever appended to; rotate it with ``copytruncate`` or
by moving it away and restarting the server.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smriti.config import Settings

#: Keys of a tool result whose values are ids of memories the call touched.
ID_KEYS = frozenset({"id", "new_id", "superseded", "memory_id", "supersedes", "superseded_by"})
#: At most this many memory ids in one line (a large recall lists its first ones).
MAX_IDS = 100
AUDIT_FILE = ".audit.jsonl"


def audit_path(settings: Settings) -> Path | None:
    """Where ``settings`` send the audit log, or None when it is off."""
    value = settings.audit_log.strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value).expanduser()
    return settings.storage_location.expanduser() / AUDIT_FILE


class AuditLog:
    """An append-only JSON-lines file, mode 0600. Safe to call from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(self._fd, 0o600)  # an existing file too: it names who did what
        self._lock = threading.Lock()

    def record(self, **fields: Any) -> None:
        """Append one line: the time, then ``fields`` (None values left out)."""
        line = {"time": datetime.now(UTC).isoformat()}
        line.update({k: v for k, v in fields.items() if v is not None})
        data = (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode()
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, data)  # one write with O_APPEND: lines never interleave

    def close(self) -> None:
        """Close the file (later records are dropped)."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def memory_ids(arguments: Mapping[str, Any] | None, result: Any) -> list[str]:
    """The ids of memories a tool call named (``memory_id``) or returned."""
    found: list[str] = []
    named = arguments.get("memory_id") if isinstance(arguments, Mapping) else None
    if isinstance(named, str) and named.strip():
        found.append(named.strip()[:64])
    _collect(result, found, depth=0)
    return list(dict.fromkeys(found))[:MAX_IDS]


def _collect(value: Any, found: list[str], depth: int) -> None:
    if depth > 5 or len(found) >= MAX_IDS:
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ID_KEYS and isinstance(item, str) and item:
                found.append(item[:64])
            elif isinstance(item, Mapping | list):
                _collect(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found, depth + 1)
