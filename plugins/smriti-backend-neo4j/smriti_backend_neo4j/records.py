"""Conversion between Smriti's model objects and Neo4j property maps.

Embeddings travel as lists of floats (query parameters, never query text); timestamps
as [seconds, microseconds] since the epoch, which the statements store as Neo4j
``DATETIME`` values (``cypher.at``), and reads return as microseconds since the epoch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from smriti.backend import (
    STOPWORDS,
    Association,
    Cue,
    Engram,
    EngramStats,
    EngramUpdate,
    clamp01,
    normalise_cue_name,
    utcnow,
)


def vector_param(embedding: object) -> list[float] | None:
    """An embedding as a list of floats for a query parameter (None stays None)."""
    if embedding is None:
        return None
    return np.asarray(embedding, dtype=np.float64).reshape(-1).tolist()


def vector_bytes(embedding: object) -> bytes | None:
    """An embedding as little-endian float32 bytes (the compact copy reads return)."""
    if embedding is None:
        return None
    return np.asarray(embedding, dtype="<f4").reshape(-1).tobytes()


def vector_from(props: Mapping[str, Any]) -> np.ndarray | None:
    """A node's embedding from its compact copy, else from the float list (older data)."""
    packed = props.get("embedding_f32")
    if packed is not None:
        return np.frombuffer(bytes(packed), dtype="<f4").astype(np.float32)
    listed = props.get("embedding")
    return None if listed is None else np.asarray(listed, dtype=np.float32)


def utc(ts: datetime) -> datetime:
    """A timezone-aware UTC datetime (naive values are taken to be UTC already)."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_pair(ts: datetime) -> list[int]:
    """A timestamp as [seconds, microseconds] since the epoch (microseconds in 0..999999),
    which statements turn into a ``DATETIME`` with ``cypher.at``: the driver packs two
    integers far faster than it dehydrates a datetime (about 0.4 ms each)."""
    delta = utc(ts) - EPOCH
    return [delta.days * 86400 + delta.seconds, delta.microseconds]


def epoch_micros(ts: datetime) -> int:
    """A timestamp as microseconds since the epoch: what reads return (``cypher.micros``),
    so keys built from returned engrams compare exactly."""
    seconds, micros = epoch_pair(ts)
    return seconds * 1_000_000 + micros


def from_neo4j_time(value: Any) -> datetime:
    """A timezone-aware UTC datetime from microseconds since the epoch (what the read
    queries project), a driver ``DateTime`` or a datetime."""
    if isinstance(value, int):
        return EPOCH + timedelta(microseconds=value)
    native = value.to_native() if hasattr(value, "to_native") else value
    return utc(native)


def engram_props(engram: Engram, user: str) -> dict[str, Any]:
    """Every stored property of an engram node (``user`` included)."""
    tags = [str(t) for t in engram.tags]
    return {
        "user": user,
        "id": engram.id,
        "content": engram.content,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "importance": clamp01(engram.importance),
        "access_count": int(engram.access_count),
        # [seconds, microseconds]: statements store them as DATETIME (cypher.at).
        "created_at": epoch_pair(engram.created_at),
        "last_accessed_at": epoch_pair(engram.last_accessed_at),
        "decay_factor": clamp01(engram.decay_factor),
        "embedding": vector_param(engram.embedding),
        "embedding_f32": vector_bytes(engram.embedding),
        "source": engram.source,
        "tags": tags,
        # Full-text indexes cover string properties only, so tags are also kept as text.
        "tags_text": " ".join(tags),
        "cluster_id": int(engram.cluster_id),
        "supersedes": engram.supersedes,
        "superseded_by": engram.superseded_by,
        "superseded_at": None if engram.superseded_at is None else epoch_pair(engram.superseded_at),
        "origin": engram.origin or "",
        "principal": engram.principal or "",
    }


def whole(props: Mapping[str, Any]) -> bool:
    """Whether an engram projection is complete. Reads are read-committed: a node that a
    concurrent forget deletes while a query reads it comes back with missing values,
    and is skipped as if the read had come a moment later."""
    return all(props.get(k) is not None for k in ("id", "created_at", "last_accessed_at"))


def engram_from(props: Mapping[str, Any]) -> Engram:
    """An Engram from a node's property map."""
    superseded_at = props.get("superseded_at")
    return Engram(
        id=props["id"],
        content=props.get("content", ""),
        summary=props.get("summary", ""),
        memory_type=props.get("memory_type", "episodic"),
        importance=float(props.get("importance", 0.5)),
        created_at=from_neo4j_time(props["created_at"]),
        last_accessed_at=from_neo4j_time(props["last_accessed_at"]),
        access_count=int(props.get("access_count", 0)),
        decay_factor=float(props.get("decay_factor", 1.0)),
        embedding=vector_from(props),
        source=props.get("source", ""),
        tags=list(props.get("tags") or []),
        cluster_id=int(props.get("cluster_id", -1)),
        supersedes=props.get("supersedes") or "",
        superseded_by=props.get("superseded_by") or "",
        superseded_at=None if superseded_at is None else from_neo4j_time(superseded_at),
        origin=props.get("origin") or "",
        principal=props.get("principal") or "",
    )


def stats_from(props: Mapping[str, Any]) -> EngramStats:
    """Consolidation fields from a projection of an engram node."""
    return EngramStats(
        id=props["id"],
        importance=float(props["importance"]),
        access_count=int(props["access_count"]),
        last_accessed_at=from_neo4j_time(props["last_accessed_at"]),
        decay_factor=float(props["decay_factor"]),
        cluster_id=int(props.get("cluster_id", -1)),
    )


def cue_props(cue: Cue, user: str) -> dict[str, Any]:
    """Every stored property of a cue node; ``key`` is the normalised merge key."""
    return {
        "user": user,
        "id": cue.id,
        "name": cue.name,
        "key": normalise_cue_name(cue.name),
        "cue_type": cue.cue_type,
        "embedding": vector_param(cue.embedding),
        "embedding_f32": vector_bytes(cue.embedding),
    }


def cue_from(props: Mapping[str, Any]) -> Cue:
    """A Cue from a node's property map."""
    return Cue(
        id=props["id"],
        name=props["name"],
        cue_type=props.get("cue_type", "keyword"),
        embedding=vector_from(props),
    )


MAX_QUERY_TERMS = 256


def lucene_query(text: str) -> str:
    """Plain user text as a Lucene query that matches any of its words, syntax inert.

    Each whitespace-separated token becomes a quoted phrase (inside quotes only ``"``
    and ``\\`` are special, and both are escaped); tokens without a letter or digit
    are dropped because the analyzer would discard them anyway. Stopwords (the core's
    lexical analyzer's list) are left out unless the text has nothing else: the index
    keeps them, so "the" would make Lucene score nearly every memory. Returns "" when
    nothing is left. At most ``MAX_QUERY_TERMS`` distinct tokens are kept (Lucene refuses
    queries of more than 1024 clauses).
    """
    tokens = [t for t in dict.fromkeys(text.split()) if any(ch.isalnum() for ch in t)]
    content = [t for t in tokens if "".join(filter(str.isalnum, t.lower())) not in STOPWORDS]
    phrases: dict[str, None] = {}
    for token in content or tokens:
        escaped = token.replace("\\", "\\\\").replace('"', '\\"')
        phrases[f'"{escaped}"'] = None
        if len(phrases) >= MAX_QUERY_TERMS:
            break
    return " OR ".join(phrases)


def distinct_cues(cues: Sequence[Cue], user: str) -> list[dict[str, Any]]:
    """Cue property maps, one per normalised name (the first wins)."""
    rows: dict[str, dict[str, Any]] = {}
    for cue in cues:
        props = cue_props(cue, user)
        rows.setdefault(props["key"], props)
    return list(rows.values())


def association_row(a: Association) -> dict[str, Any]:
    return {
        "source": a.source_id,
        "target": a.target_id,
        "strength": float(a.strength),
        "relation_type": a.relation_type,
        "created_at": epoch_pair(a.created_at if a.created_at else utcnow()),
    }


def association_from(row: Sequence[Any]) -> Association:
    source, target, strength, relation_type, created_at = row
    when = from_neo4j_time(created_at) if created_at is not None else None
    return Association(source, target, float(strength), relation_type or "semantic", when)


def update_row(u: EngramUpdate) -> dict[str, Any]:
    """The parameters of one ``cypher.UPDATE_ENGRAMS`` row; None leaves a field as it is."""
    tags = None if u.tags is None else [str(t) for t in u.tags]
    return {
        "id": u.id,
        "access_count": None if u.access_count is None else int(u.access_count),
        "last_accessed_at": None if u.last_accessed_at is None else epoch_pair(u.last_accessed_at),
        "decay_factor": None if u.decay_factor is None else clamp01(u.decay_factor),
        "cluster_id": None if u.cluster_id is None else int(u.cluster_id),
        "importance": None if u.importance is None else clamp01(u.importance),
        "tags": tags,
        "tags_text": None if tags is None else " ".join(tags),
        "superseded_by": u.superseded_by,
        "superseded_at": None if u.superseded_at is None else epoch_pair(u.superseded_at),
    }
