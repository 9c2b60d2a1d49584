"""Reader for mcp-memory-service's JSON export.

Followed: mcp-memory-service's sync code, ``src/mcp_memory_service/sync/importer.py``
(importer version 4.5.0, which reads what its exporter writes) and its ``Memory``
model (``models/memory.py``): ``{"export_metadata": {"source_machine", "export_timestamp",
...}, "memories": [...]}``, each memory ``{"content", "content_hash", "tags",
"memory_type", "metadata", "created_at", "created_at_iso", "updated_at",
"updated_at_iso"}`` with ``created_at`` a Unix time (float) and ``*_iso`` its ISO 8601
form. The storage form of a row (``tags_str`` comma-joined, ``type``) is read as well.

What becomes what: each memory is one Smriti memory (its ``content``), tagged with its
tags and its memory type (``note``, ``decision``, ``reference``, ...), dated by its
``created_at`` (the ISO form when the float is missing). The content hash keys the
record, as mcp-memory-service deduplicates by it; a memory exported without one (its own
importer would skip it) is keyed by the SHA-256 of its content instead, so it is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected, json_file

__all__ = ["read"]

EXPECTED = (
    'an mcp-memory-service export: a JSON object with "export_metadata" and "memories" '
    "(as its sync exporter writes)"
)


def read(path: Path) -> Iterator[Imported | Rejected]:
    """The memories of an mcp-memory-service export; InvalidInput when the file is not one."""
    for number, row in enumerate(_rows(path), 1):
        yield _record(row, f"memory {number}")


def _rows(path: Path) -> list[Any]:
    data = json_file(path, EXPECTED)
    # The same check mcp-memory-service's own importer makes.
    if not isinstance(data, dict) or "export_metadata" not in data or "memories" not in data:
        raise InvalidInput(f"{path} is not {EXPECTED}")
    if not isinstance(data["memories"], list):
        raise InvalidInput(f'{path}: "memories" is not a list; expected {EXPECTED}')
    return data["memories"]


def _record(row: object, where: str) -> Imported | Rejected:
    if not isinstance(row, dict):
        return Rejected(where, "not a JSON object")
    content, digest = row.get("content"), row.get("content_hash")
    if not isinstance(content, str) or not content.strip():
        return Rejected(where, 'no "content" text')
    if not isinstance(digest, str) or not digest:
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
    try:
        when = _moment(row.get("created_at"), row.get("created_at_iso"))
    except ValueError as error:
        return Rejected(where, str(error))
    return Imported(f"mms:{digest}", content.strip(), tags=_tags(row), occurred_at=when)


def _tags(row: dict[str, Any]) -> tuple[str, ...]:
    tags = row.get("tags")
    if not isinstance(tags, list):
        tags = str(row.get("tags_str") or tags or "").split(",")
    kind = row.get("memory_type") or row.get("type")
    found = [str(t).strip() for t in [*tags, kind] if isinstance(t, str) and t.strip()]
    return tuple(dict.fromkeys(found))


def _moment(unix: object, iso: object) -> datetime | None:
    if isinstance(unix, int | float) and not isinstance(unix, bool):
        return datetime.fromtimestamp(unix, tz=UTC)
    text = iso if isinstance(iso, str) and iso else unix
    if text in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"created_at {text!r} is neither a Unix time nor ISO 8601") from None
    # mcp-memory-service reads an ISO time without an offset as UTC.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
