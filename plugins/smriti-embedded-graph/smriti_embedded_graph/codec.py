"""Conversions between model values and what the Kùzu schema stores.

Embeddings are stored as base64 of little-endian float32 bytes in a STRING column:
Kùzu binds strings fast, while float-list parameters are slow to insert (TESTING.md:
84 s for 10k x 384 through UNWIND; strings take about 1 s) and Python ``bytes`` cannot
be bound at all. Timestamps are stored as naive UTC (Kùzu drops the offset of an aware
datetime) and read back as aware UTC.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import numpy as np

from smriti.backend import Association, Cue, Engram, as_vector

ENGRAM_FIELDS = (
    "e.id, e.content, e.summary, e.memory_type, e.importance, e.access_count, "
    "e.created_at, e.last_accessed_at, e.decay_factor, e.embedding, e.source, e.tags, "
    "e.cluster_id, e.supersedes, e.superseded_by, e.superseded_at, e.origin, e.principal"
)
CUE_FIELDS = "c.id, c.name, c.cue_type, c.embedding"


def ts_in(value: datetime | None) -> datetime | None:
    """A naive UTC datetime for Kùzu (naive input is taken to be UTC already)."""
    if value is None:
        return None
    if value.tzinfo is not None and value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None)


def ts_out(value: datetime | None) -> datetime:
    """An aware UTC datetime from Kùzu's naive value."""
    if value is None:
        return datetime.fromtimestamp(0, UTC)
    return value.replace(tzinfo=UTC)


def ts_out_or_none(value: datetime | None) -> datetime | None:
    """Like ``ts_out``, but an unset time stays None."""
    return None if value is None else value.replace(tzinfo=UTC)


def vec_in(vector: object) -> str | None:
    """The stored form of an embedding (None stays None)."""
    if vector is None:
        return None
    return base64.b64encode(as_vector(vector).astype("<f4").tobytes()).decode("ascii")


def vec_out(value: str | None) -> np.ndarray | None:
    """The float32 embedding from its stored form."""
    if not value:
        return None
    return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)


def vec_literal(vector: np.ndarray) -> str:
    """A list literal Kùzu can CAST to FLOAT[n] (fast, unlike a float-list parameter)."""
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


def engram_params(e: Engram) -> dict[str, Any]:
    """Parameters of one Engram row (validated and converted before any write)."""
    tags = [str(t) for t in e.tags]
    return {
        "id": e.id,
        "content": e.content,
        "summary": e.summary,
        "memory_type": e.memory_type,
        "importance": float(e.importance),
        "access_count": int(e.access_count),
        "created_at": ts_in(e.created_at),
        "last_accessed_at": ts_in(e.last_accessed_at),
        "decay_factor": float(e.decay_factor),
        "embedding": vec_in(e.embedding),
        "source": e.source or "",
        "tags": tags,
        "tags_text": " ".join(tags),
        "cluster_id": int(e.cluster_id),
        "supersedes": e.supersedes or "",
        "superseded_by": e.superseded_by or "",
        "superseded_at": ts_in(e.superseded_at),
        "origin": e.origin or "",
        "principal": e.principal or "",
    }


ENGRAM_COLUMNS = (
    "id",
    "content",
    "summary",
    "memory_type",
    "importance",
    "access_count",
    "created_at",
    "last_accessed_at",
    "decay_factor",
    "embedding",
    "source",
    "tags",
    "tags_text",
    "cluster_id",
    "supersedes",
    "superseded_by",
    "superseded_at",
    "origin",
    "principal",
)
#: Casts of row fields whose type Kùzu may not infer from the values: a batch of rows
#: whose ``superseded_at`` are all None binds it as STRING, which a TIMESTAMP column
#: refuses ("Implicit cast is not supported"); likewise lists that are all empty.
ROW_CASTS = {"superseded_at": "TIMESTAMP", "tags": "STRING[]"}


def row_value(column: str, row: str = "r") -> str:
    """``row.column``, cast where ``ROW_CASTS`` says so."""
    cast = ROW_CASTS.get(column)
    return f"{row}.{column}" if cast is None else f"CAST({row}.{column} AS {cast})"


#: ``SET`` list replacing every column of ``e`` from row ``r``.
ENGRAM_SET = ", ".join(f"e.{c} = {row_value(c)}" for c in ENGRAM_COLUMNS[1:])
#: ``CREATE`` of an Engram from row ``r``.
ENGRAM_CREATE = (
    "CREATE (:Engram {" + ", ".join(f"{c}: {row_value(c)}" for c in ENGRAM_COLUMNS) + "})"
)
#: ``CREATE`` of one Engram from scalar parameters (half the cost of a one-row UNWIND).
ENGRAM_CREATE_ONE = "CREATE (:Engram {" + ", ".join(f"{c}: ${c}" for c in ENGRAM_COLUMNS) + "})"


def engram_from_row(row: list[Any]) -> Engram:
    """An Engram from a row of ENGRAM_FIELDS."""
    return Engram(
        id=row[0],
        content=row[1] or "",
        summary=row[2] or "",
        memory_type=row[3] or "episodic",
        importance=float(row[4] if row[4] is not None else 0.5),
        access_count=int(row[5] or 0),
        created_at=ts_out(row[6]),
        last_accessed_at=ts_out(row[7]),
        decay_factor=float(row[8] if row[8] is not None else 1.0),
        embedding=vec_out(row[9]),
        source=row[10] or "",
        tags=list(row[11] or []),
        cluster_id=int(row[12] if row[12] is not None else -1),
        supersedes=row[13] or "",
        superseded_by=row[14] or "",
        superseded_at=ts_out_or_none(row[15]),
        origin=row[16] or "",
        principal=row[17] or "",
    )


def cue_params(c: Cue) -> dict[str, Any]:
    """Parameters of one Cue row."""
    return {"id": c.id, "name": c.name, "cue_type": c.cue_type, "embedding": vec_in(c.embedding)}


def cue_from_row(row: list[Any]) -> Cue:
    """A Cue from a row of CUE_FIELDS."""
    return Cue(id=row[0], name=row[1], cue_type=row[2] or "keyword", embedding=vec_out(row[3]))


#: Columns of EncodedBy rows ``(e:Engram)-[r:EncodedBy]->(c:Cue)``.
LINK_FIELDS = "e.id, c.id, r.strength"
#: Columns of AssociatedWith rows ``(a:Engram)-[r:AssociatedWith]->(b:Engram)``.
ASSOC_FIELDS = "a.id, b.id, r.strength, r.relation_type, r.created_at"


def association_from_row(row: list[Any]) -> Association:
    """An Association from a row of ASSOC_FIELDS."""
    created = ts_out(row[4]) if row[4] else None
    return Association(row[0], row[1], float(row[2]), row[3], created)
