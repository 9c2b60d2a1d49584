"""The JSON form of the records: plain values, timestamps as ISO 8601 with their UTC
offset, vectors as lists of floats."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from typing import Any

import numpy as np

from smriti.backend import Association, CoOccurrence, Cue, Engram, Link

_TIMES = {"created_at", "last_accessed_at", "superseded_at"}


def _out(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, np.ndarray):
        return [float(x) for x in value]
    if isinstance(value, tuple):
        return list(value)
    return value


def to_json(record: Any) -> dict[str, Any]:
    """A record (engram, cue or edge) as a JSON-ready mapping."""
    return {f.name: _out(getattr(record, f.name)) for f in fields(record)}


def _in(name: str, value: Any) -> Any:
    if name in _TIMES or (name == "created_at" and value is not None):
        return None if value is None else datetime.fromisoformat(value)
    if name == "embedding":
        return None if value is None else np.asarray(value, dtype=np.float32)
    if name == "tags":
        return list(value)
    return value


def engram(data: dict[str, Any]) -> Engram:
    """An engram from ``to_json``'s mapping."""
    return Engram(**{k: _in(k, v) for k, v in data.items()})


def cue(data: dict[str, Any]) -> Cue:
    """A cue from ``to_json``'s mapping."""
    return Cue(**{k: _in(k, v) for k, v in data.items()})


def link(data: dict[str, Any]) -> Link:
    """An EncodedBy edge from ``to_json``'s mapping."""
    return Link(**data)


def association(data: dict[str, Any]) -> Association:
    """An AssociatedWith edge from ``to_json``'s mapping."""
    return Association(**{k: _in(k, v) for k, v in data.items()})


def cooccurrence(data: dict[str, Any]) -> CoOccurrence:
    """A CoOccurs edge from ``to_json``'s mapping."""
    return CoOccurrence(**data)
