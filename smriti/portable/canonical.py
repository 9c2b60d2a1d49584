"""A canonical fingerprint of a store's graph, to verify exports, imports and restores."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from smriti.model import Engram
from smriti.portable.source import Source, source_of

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def canonical_hash(source: Source) -> str:
    """SHA-256 (hex) of a canonical serialisation of the user's whole graph.

    Two stores with the same memories give the same hash, whatever the backend, the
    user name or the order records come back in: engrams by id with every property,
    the version fields ``supersedes``/``superseded_by``/``superseded_at`` and the origin
    fields ``origin``/``principal`` included (floats rounded to 6 decimals, timestamps
    to milliseconds, embeddings quantised to 1e-5), cues by name (cue ids are internal
    and may differ after a merge), EncodedBy edges as (engram id, cue name, strength),
    AssociatedWith edges as (source id, target id, relation type, strength,
    created_at) and CoOccurs edges as (cue name, cue name, strength), each section
    sorted. Use it to check a restore:
    ``smriti export`` on both sides, or ``canonical_hash(engine)`` in Python.
    """
    backend, _ = source_of(source)
    digest = hashlib.sha256(b"smriti-canonical-v1\n")
    engrams = sorted((e.id, engram_digest(e)) for e in backend.iter_engrams())
    _section(digest, "engrams", (f"{i}:{d}" for i, d in engrams))
    names: dict[str, str] = {}
    cues: list[str] = []
    for c in backend.iter_cues():
        names[c.id] = c.name
        cues.append(json.dumps([c.name, c.cue_type, _vector_digest(c.embedding)]))
    _section(digest, "cues", sorted(cues))
    links = [
        json.dumps([x.engram_id, names.get(x.cue_id, "?" + x.cue_id), _r(x.strength)])
        for x in backend.iter_links()
    ]
    _section(digest, "links", sorted(links))
    assoc = [
        json.dumps([a.source_id, a.target_id, a.relation_type, _r(a.strength), _ms(a.created_at)])
        for a in backend.iter_associations()
    ]
    _section(digest, "associations", sorted(assoc))
    co = [
        json.dumps([names.get(x.source_id, "?"), names.get(x.target_id, "?"), _r(x.strength)])
        for x in backend.iter_cooccurrences()
    ]
    _section(digest, "cooccurrences", sorted(co))
    return digest.hexdigest()


def _section(digest: Any, name: str, lines: Any) -> None:
    digest.update(f"[{name}]\n".encode())
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")


def _r(value: float) -> str:
    return f"{round(float(value), 6) + 0.0:.6f}"


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    return (value.astimezone(UTC) - _EPOCH) // timedelta(milliseconds=1)


def _vector_digest(vector: np.ndarray | None) -> str | None:
    if vector is None:
        return None
    q = np.rint(np.asarray(vector, dtype=np.float64) * 1e5).astype("<i8")
    return hashlib.sha256(q.tobytes()).hexdigest()


def engram_digest(e: Engram, *, versions: bool = True) -> str:
    """SHA-256 (hex) of every property of ``e`` in canonical form (see canonical_hash).

    ``versions=False`` leaves out ``superseded_by``/``superseded_at`` (the merge orders
    versions of a memory without them and resolves supersession on its own). The
    version fields (``supersedes`` too) enter the digest only when one is set, so the
    digest of a memory that was never corrected is the same as before they existed.
    """
    fields: list[object] = [
        e.content,
        e.summary,
        e.memory_type,
        _r(e.importance),
        int(e.access_count),
        _ms(e.created_at),
        _ms(e.last_accessed_at),
        _r(e.decay_factor),
        e.source,
        list(e.tags),
        int(e.cluster_id),
        _vector_digest(e.embedding),
    ]
    if e.supersedes or (versions and (e.superseded_by or e.superseded_at is not None)):
        fields.append(e.supersedes)
        if versions:
            fields += [e.superseded_by, _ms(e.superseded_at)]
    if e.origin or e.principal:  # likewise: unchanged for a memory of unknown origin
        fields += ["origin", e.origin, e.principal]
    return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode("utf-8")).hexdigest()
