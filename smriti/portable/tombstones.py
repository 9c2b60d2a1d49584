"""Tombstones: the durable record that a memory was forgotten, carried by every backup.

A merge of two stores is a union by memory id, so without a record of deletions a
memory forgotten on one machine would come back from any machine that still holds it.
``Engine.forget`` and consolidation's prune therefore record a tombstone before they
delete, in the store's metadata (key ``tombstones``, one JSON object, so every backend
keeps them without a schema change), and exports carry them as ``tombstone`` records.

Two kinds:

- ``forget`` (a person or a client asked): final. The memory is deleted everywhere and
  never re-added, whatever version another machine holds.
- ``prune`` (consolidation found it weak): conditional. It holds the pruned version's
  ``last_accessed_at`` and ``access_count``; a version of the memory accessed since (on
  a machine that recalled it before hearing of the prune) is newer and survives, as a
  fresh access would have kept it from being pruned in the first place.

Tombstones of one id merge to the strongest (``forget`` over ``prune``, then the later
version, then the earlier time), so every machine ends with the same set. They are
kept forever: about 100 bytes per forgotten memory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.model import Engram, utcnow
from smriti.portable.format import parse_ts, ts

if TYPE_CHECKING:
    from smriti.backend import StorageBackend

TOMBSTONES_KEY = "tombstones"
FORGET = "forget"
PRUNE = "prune"
#: Serialises the read-modify-write of the metadata value (forgets on several threads,
#: a merge applying its result). One lock per process is enough: a store is open in one
#: process at a time.
LOCK = threading.RLock()


@dataclass(slots=True, frozen=True)
class Tombstone:
    """One forgotten memory (see the module docstring for the two kinds)."""

    id: str
    kind: str
    at: datetime
    #: For ``prune``: the pruned version; a version accessed later survives.
    last_accessed_at: datetime | None = None
    access_count: int = 0

    def rank(self) -> tuple[bool, int, int, int]:
        """Total order used to merge two tombstones of one id (the larger wins)."""
        seen = _ms(self.last_accessed_at) if self.last_accessed_at else -1
        return (self.kind == FORGET, seen, self.access_count, -_ms(self.at))

    def kills(self, engram: Engram) -> bool:
        """Whether this tombstone deletes ``engram`` (a version of the same id)."""
        if self.kind == FORGET or self.last_accessed_at is None:
            return True
        pruned = (_ms(self.last_accessed_at), self.access_count)
        return (_ms(engram.last_accessed_at), engram.access_count) <= pruned

    def to_record(self) -> dict[str, Any]:
        """The JSON form (metadata value entry and export record)."""
        out: dict[str, Any] = {"id": self.id, "type": self.kind, "at": ts(self.at)}
        if self.kind == PRUNE and self.last_accessed_at is not None:
            out["last_accessed_at"] = ts(self.last_accessed_at)
            out["access_count"] = self.access_count
        return out

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Tombstone:
        """A Tombstone from its JSON form; ValueError/KeyError when malformed."""
        kind = str(r.get("type", FORGET))
        if kind not in (FORGET, PRUNE):
            raise ValueError(f"unknown tombstone type {kind!r}")
        seen = r.get("last_accessed_at")
        return cls(
            str(r["id"]),
            kind,
            parse_ts(r["at"]),
            parse_ts(seen) if seen else None,
            int(r.get("access_count", 0)),
        )


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def forgotten(engram_id: str) -> Tombstone:
    """The tombstone of a memory a person forgot now."""
    return Tombstone(engram_id, FORGET, utcnow())


def pruned(engram: Engram | Any) -> Tombstone:
    """The tombstone of a memory consolidation prunes now (``engram``: Engram or stats)."""
    return Tombstone(engram.id, PRUNE, utcnow(), engram.last_accessed_at, int(engram.access_count))


def combine(a: Tombstone | None, b: Tombstone | None) -> Tombstone | None:
    """The stronger of two tombstones of one id (None when both are None)."""
    if a is None or b is None:
        return a or b
    return a if a.rank() >= b.rank() else b


def merge_all(*sets: Mapping[str, Tombstone]) -> dict[str, Tombstone]:
    """The union of tombstone sets, the stronger tombstone per id."""
    out: dict[str, Tombstone] = {}
    for one in sets:
        for key, stone in one.items():
            merged = combine(out.get(key), stone)
            assert merged is not None
            out[key] = merged
    return out


def load(backend: StorageBackend) -> dict[str, Tombstone]:
    """The store's tombstones by memory id."""
    raw = backend.get_meta(TOMBSTONES_KEY)
    if not raw:
        return {}
    stones = (Tombstone.from_record(r) for r in json.loads(raw))
    return {t.id: t for t in stones}


def save(backend: StorageBackend, stones: Mapping[str, Tombstone]) -> None:
    """Replace the store's tombstones (sorted by id, so the value is canonical)."""
    records = [stones[k].to_record() for k in sorted(stones)]
    backend.set_meta(TOMBSTONES_KEY, json.dumps(records, separators=(",", ":")))


def record(backend: StorageBackend, new: Iterable[Tombstone]) -> None:
    """Add tombstones to the store (merged with any already recorded for the same ids)."""
    new = list(new)
    if not new:
        return
    with LOCK:
        save(backend, merge_all(load(backend), {t.id: t for t in new}))
