"""Conversions between model values and the columns of the SQLite schema.

Timestamps are integer microseconds since the Unix epoch, UTC (exact, and ordered like
the times they stand for); embeddings are little-endian float32 blobs; tags are a JSON
list. Nothing here touches a connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from smriti.backend import Association, Cue, Engram, as_vector

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Engram columns in the order ``engram_from_row`` reads them.
ENGRAM_COLUMNS = (
    "id, content, summary, memory_type, importance, access_count, created_at, "
    "last_accessed_at, decay_factor, embedding, source, tags, cluster_id, supersedes, "
    "superseded_by, superseded_at, origin, principal"
)
CUE_COLUMNS = "id, name, cue_type, embedding"
ASSOCIATION_COLUMNS = "source_id, target_id, strength, relation_type, created_at"


def ts_in(value: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def ts_out(value: int | None) -> datetime:
    """The aware UTC datetime of a stored timestamp."""
    return EPOCH + timedelta(microseconds=int(value or 0))


def ts_maybe_in(value: datetime | None) -> int | None:
    """``ts_in`` of an optional time (None stays None: SQL NULL)."""
    return None if value is None else ts_in(value)


def ts_maybe_out(value: int | None) -> datetime | None:
    """``ts_out`` of an optional stored time (NULL is None)."""
    return None if value is None else ts_out(value)


def vec_in(vector: object) -> bytes | None:
    """The stored form of an embedding (None stays None)."""
    if vector is None:
        return None
    return as_vector(vector).astype("<f4").tobytes()


def vec_out(blob: bytes | None) -> np.ndarray | None:
    """The float32 embedding of a stored blob (a writable copy)."""
    if blob is None:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def engram_row(engram: Engram) -> dict[str, Any]:
    """Named parameters of one engram row (embedding converted, so a bad one fails here)."""
    return {
        "id": engram.id,
        "content": engram.content,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "importance": float(engram.importance),
        "access_count": int(engram.access_count),
        "created_at": ts_in(engram.created_at),
        "last_accessed_at": ts_in(engram.last_accessed_at),
        "decay_factor": float(engram.decay_factor),
        "embedding": vec_in(engram.embedding),
        "source": engram.source,
        "tags": json.dumps(list(engram.tags), ensure_ascii=False),
        "cluster_id": int(engram.cluster_id),
        "supersedes": engram.supersedes or "",
        "superseded_by": engram.superseded_by or "",
        "superseded_at": ts_maybe_in(engram.superseded_at),
        "origin": engram.origin or "",
        "principal": engram.principal or "",
    }


def engram_from_row(row: Sequence[Any]) -> Engram:
    """An Engram from a row of ``ENGRAM_COLUMNS``."""
    return Engram(
        id=row[0],
        content=row[1],
        summary=row[2],
        memory_type=row[3],
        importance=float(row[4]),
        access_count=int(row[5]),
        created_at=ts_out(row[6]),
        last_accessed_at=ts_out(row[7]),
        decay_factor=float(row[8]),
        embedding=vec_out(row[9]),
        source=row[10],
        tags=list(json.loads(row[11])),
        cluster_id=int(row[12]),
        # A store migrated from schema 1 holds '' and NULL here (the column defaults).
        supersedes=row[13] or "",
        superseded_by=row[14] or "",
        superseded_at=ts_maybe_out(row[15]),
        origin=row[16] or "",
        principal=row[17] or "",
    )


def cue_from_row(row: Sequence[Any]) -> Cue:
    """A Cue from a row of ``CUE_COLUMNS``."""
    return Cue(row[0], row[1], row[2], vec_out(row[3]))


def association_from_row(row: Sequence[Any]) -> Association:
    """An Association from a row of ``ASSOCIATION_COLUMNS``."""
    created = None if row[4] is None else ts_out(row[4])
    return Association(row[0], row[1], float(row[2]), row[3], created)
