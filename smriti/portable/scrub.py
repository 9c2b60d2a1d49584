"""Scrub purged memories out of an export file's text (for a backup's old snapshots).

``scrub`` removes from one snapshot (a portable export, JSON lines) the records of the
given engrams and everything that holds their text or points at them: their engram
lines, their EncodedBy links and AssociatedWith edges, the cues that only they were
EncodedBy in that snapshot (a cue's name is a word of the memory), and those cues'
co-occurrences. Every other line stays byte for byte, so a scrubbed snapshot's body
digest changes only by the removed lines; the header's and trailer's counts are
lowered to match. Tombstones are kept: they hold ids and dates, never text.

Backup providers call it on every snapshot they keep (``BackupProvider.purge``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

#: Record kind → the export's ``counts`` key.
_COUNTED = {
    "engram": "engrams",
    "cue": "cues",
    "link": "links",
    "association": "associations",
    "cooccurrence": "cooccurrences",
}


def scrub(text: str, ids: Iterable[str]) -> str | None:
    """``text`` without the purged engrams ``ids`` (see the module docstring); None when
    it holds none of them. ValueError when a line is not JSON."""
    purged = set(ids)
    lines = text.splitlines(keepends=True)
    records = [json.loads(line) if line.strip() else None for line in lines]
    dropped_cues = _orphaned_cues(records, purged)
    keep: list[bool] = []
    removed: dict[str, int] = {}
    for record in records:
        gone = record is not None and _gone(record, purged, dropped_cues)
        keep.append(not gone)
        if gone:
            key = _COUNTED.get(str(record.get("kind")), "")
            removed[key] = removed.get(key, 0) + 1
    if not removed:
        return None
    out = []
    for line, record, kept in zip(lines, records, keep, strict=True):
        if not kept:
            continue
        if record is not None and record.get("kind") in ("header", "trailer"):
            line = _recounted(record, removed, line)
        out.append(line)
    return "".join(out)


def _orphaned_cues(records: list[dict[str, Any] | None], purged: set[str]) -> set[str]:
    """Cues linked from a purged engram and from no other engram of the snapshot."""
    theirs: set[str] = set()
    others: set[str] = set()
    for r in records:
        if r is not None and r.get("kind") == "link":
            (theirs if r.get("engram_id") in purged else others).add(str(r.get("cue_id")))
    return theirs - others


def _gone(r: dict[str, Any], purged: set[str], cues: set[str]) -> bool:
    kind = r.get("kind")
    if kind == "engram":
        return r.get("id") in purged
    if kind == "link":
        return r.get("engram_id") in purged
    if kind == "association":
        return r.get("source_id") in purged or r.get("target_id") in purged
    if kind == "cue":
        return r.get("id") in cues
    if kind == "cooccurrence":
        return r.get("source_id") in cues or r.get("target_id") in cues
    return False


def _recounted(record: dict[str, Any], removed: dict[str, int], line: str) -> str:
    counts = record.get("counts")
    if not isinstance(counts, dict):
        return line
    for key, n in removed.items():
        if isinstance(counts.get(key), int):
            counts[key] = max(0, counts[key] - n)
    newline = "\n" if line.endswith("\n") else ""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + newline
