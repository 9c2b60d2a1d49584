"""The records an import reader yields: one memory read from a source, or one it could not read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from smriti.errors import InvalidInput

__all__ = ["Imported", "Rejected", "json_file"]


@dataclass(frozen=True, slots=True)
class Imported:
    """One memory a source file yields.

    ``key`` is stable within the source (e.g. ``"entity:Alice#2"``) so a re-run of the
    same file derives the same memory id and adds nothing. ``occurred_at`` is an aware
    UTC datetime or None. ``cues`` are names (entities, types) linked as cues through
    tags. ``links`` are ``(target key, relation type)`` pairs made into associations.
    """

    key: str
    content: str
    tags: tuple[str, ...] = ()
    occurred_at: datetime | None = None
    importance: float | None = None
    cues: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record that could not be read: where it is (``"line 12"``, ``"notes/a.md"``) and why."""

    where: str
    reason: str


def json_file(path: Path, expected: str) -> Any:
    """The JSON document in ``path``; InvalidInput naming what was ``expected`` when
    ``path`` is not a file or not JSON."""
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file; expected {expected}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidInput(f"{path} is not JSON ({error}); expected {expected}") from None
