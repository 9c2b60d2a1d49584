"""Reader for Mem0's exported memories (JSON).

Followed: the memory objects of Mem0 1.x, as ``Memory.get_all()`` (open source,
``mem0/memory/main.py``: ``MemoryItem`` with the promoted payload keys) and the
platform's ``MemoryClient.get_all()`` return them: ``{"results": [...]}`` (or a bare list,
the v1 platform answer), each ``{"id", "memory", "hash", "metadata", "created_at",
"updated_at", "user_id", "agent_id", "run_id", ...}``; platform rows add ``categories``.
A file saved with ``json.dump(m.get_all(user_id=...), f)`` is what this reads.

What becomes what: each object is one memory (its ``memory`` text), tagged with its
``categories`` and any ``category``/``categories``/``tags`` in its metadata, its
``created_at`` as ``occurred_at``. ``user_id``/``agent_id``/``run_id`` scope Mem0's
memories to a person or an agent; Smriti's store is the user's own, so they are not
kept. The graph ``relations`` Mem0 adds beside ``results`` when its graph store is on are
not memories and are not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected, json_file

__all__ = ["read"]

EXPECTED = (
    'Mem0\'s exported memories: a JSON list, or {"results": [...]}, of objects with a '
    '"memory" text (the output of Memory.get_all())'
)


def read(path: Path) -> Iterator[Imported | Rejected]:
    """The memories of a Mem0 export; InvalidInput when the file is not one."""
    rows = _rows(path)
    for number, row in enumerate(rows, 1):
        yield _record(row, f"record {number}")


def _rows(path: Path) -> list[Any]:
    data = json_file(path, EXPECTED)
    rows = data.get("results", data.get("memories")) if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise InvalidInput(f"{path} is not {EXPECTED}")
    # A list none of whose objects has a "memory" is some other tool's file.
    if rows and not any(isinstance(r, dict) and "memory" in r for r in rows):
        raise InvalidInput(f'{path} holds no object with a "memory"; expected {EXPECTED}')
    return rows


def _record(row: object, where: str) -> Imported | Rejected:
    if not isinstance(row, dict):
        return Rejected(where, "not a JSON object")
    text = row.get("memory")
    if not isinstance(text, str) or not text.strip():
        return Rejected(where, 'no "memory" text')
    try:
        when = _moment(row.get("created_at"))
    except ValueError as error:
        return Rejected(where, str(error))
    key = f"mem0:{row.get('id') or row.get('hash') or where}"
    return Imported(key, text.strip(), tags=_tags(row), occurred_at=when)


def _tags(row: dict[str, Any]) -> tuple[str, ...]:
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    found: list[str] = []
    for value in (
        row.get("categories"),
        meta.get("category"),
        meta.get("categories"),
        meta.get("tags"),
    ):
        items = value if isinstance(value, list) else [value]
        found.extend(str(v).strip() for v in items if isinstance(v, str) and v.strip())
    return tuple(dict.fromkeys(found))


def _moment(value: object) -> datetime | None:
    """Mem0 writes ISO 8601 with an offset (``datetime.now(pytz.timezone("US/Pacific"))``)."""
    if value in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"created_at {value!r} is not an ISO 8601 time") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
