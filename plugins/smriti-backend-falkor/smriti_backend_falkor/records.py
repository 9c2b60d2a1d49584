"""Conversions between Smriti records and the parameter maps / rows FalkorDB sees.

Timestamps are stored as fixed-width ISO-8601 UTC strings (FalkorDB has no datetime
type): they round-trip to the microsecond and sort lexicographically in time order, so a
statement compares them as strings at exactly the precision they are read back with.
Embeddings travel as float lists and are stored with ``vecf32``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from smriti.backend import STOPWORDS, Association, Cue, Engram, EngramStats, normalise_cue_name

_TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
#: What :func:`parse_ts` makes of a missing timestamp, as stored: statements that sort
#: or compare a timestamp fall back to it, so they agree with the values read back.
EPOCH = "1970-01-01T00:00:00.000000Z"
#: Letters and digits only: every other character is a separator for the full-text
#: query, so user text can never become RediSearch syntax.
_TOKEN = re.compile(r"[^\W_]+")
MAX_QUERY_TOKENS = 64


def ts(value: datetime | None) -> str | None:
    """A timezone-aware datetime as a sortable UTC string (naive values are taken as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime(_TS_FORMAT)


def parse_ts(value: str | None) -> datetime:
    """The datetime stored by :func:`ts` (tz-aware UTC)."""
    if not value:
        return datetime.fromtimestamp(0, UTC)
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class FloatList:
    """A float32 vector as a query parameter: the list literal FalkorDB's parameter
    header holds, written once with 9 significant digits (enough for every float32 to
    read back exactly).

    The client spells a parameter list element by element through a generic formatter,
    about 0.4 ms per 384-wide vector, and a store sends a dozen (the memory's and its
    cues'); this takes a tenth of that and sends two thirds of the bytes. The client
    writes any value that is not a string, list, dict or None with ``str()``, so the
    literal still travels as a parameter, never as query text.
    """

    __slots__ = ("_text", "_size")

    def __init__(self, values: np.ndarray) -> None:
        items = values.tolist()
        self._size = len(items)
        self._text = "[" + ",".join([f"{x:.9g}" for x in items]) + "]"

    def __str__(self) -> str:
        return self._text

    def __len__(self) -> int:
        return self._size

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FloatList) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


def vector(values: Any) -> FloatList | None:
    """An embedding as a query parameter (float32 values), or None."""
    if values is None:
        return None
    return FloatList(np.asarray(values, dtype=np.float32).reshape(-1))


def engram_props(engram: Engram, user: str) -> dict[str, Any]:
    """Every stored property of an engram except the embedding (set with vecf32), its
    copy ``embedding_b64`` included (see ``packed``).

    ``superseded_at`` is None (so not stored: FalkorDB keeps no null properties) until a
    correction supersedes the engram.
    """
    return {
        "id": engram.id,
        "user": user,
        "content": engram.content,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "importance": float(engram.importance),
        "access_count": int(engram.access_count),
        "created_at": ts(engram.created_at),
        "last_accessed_at": ts(engram.last_accessed_at),
        "decay_factor": float(engram.decay_factor),
        "source": engram.source or "",
        **tag_props(engram.tags),
        "cluster_id": int(engram.cluster_id),
        "supersedes": engram.supersedes or "",
        "superseded_by": engram.superseded_by or "",
        "superseded_at": ts(engram.superseded_at),
        "origin": engram.origin or "",
        "principal": engram.principal or "",
        "embedding_b64": packed(engram.embedding),
    }


def packed(values: Any) -> str | None:
    """An embedding as base64 of its little-endian float32 bytes, or None.

    Reads return this copy instead of the ``vecf32`` property: the server sends a vector
    as one string per element, which the client then parses one by one (most of a
    recall's candidate pool read), while this is one string per engram, decoded in C.
    """
    if values is None:
        return None
    raw = np.asarray(values, dtype="<f4").reshape(-1).tobytes()
    return base64.b64encode(raw).decode("ascii")


def unpacked(value: Any) -> np.ndarray | None:
    """The embedding in a column of ``queries.ENGRAM_COLUMNS``: the ``packed`` copy, or
    the ``vecf32`` list of an engram written before the copy existed."""
    if value is None:
        return None
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


def tag_props(tags: Sequence[str]) -> dict[str, Any]:
    """``tags`` and ``tags_text``, the copy of them the full-text index reads."""
    values = [str(t) for t in tags]
    return {"tags": values, "tags_text": " ".join(values)}


def engram_from_row(row: Sequence[Any]) -> Engram:
    """An Engram from the columns of ``queries.ENGRAM_COLUMNS``."""
    (
        id_,
        content,
        summary,
        memory_type,
        importance,
        access_count,
        created_at,
        last_accessed_at,
        decay_factor,
        embedding,
        source,
        tags,
        cluster_id,
        supersedes,
        superseded_by,
        superseded_at,
        origin,
        principal,
    ) = row
    return Engram(
        id=id_,
        content=content or "",
        summary=summary or "",
        memory_type=memory_type,
        importance=float(importance if importance is not None else 0.5),
        created_at=parse_ts(created_at),
        last_accessed_at=parse_ts(last_accessed_at or created_at),
        access_count=int(access_count or 0),
        decay_factor=float(decay_factor if decay_factor is not None else 1.0),
        embedding=unpacked(embedding),
        source=source or "",
        tags=list(tags or []),
        cluster_id=int(cluster_id if cluster_id is not None else -1),
        supersedes=supersedes or "",
        superseded_by=superseded_by or "",
        superseded_at=parse_ts(superseded_at) if superseded_at else None,
        origin=origin or "",
        principal=principal or "",
    )


def stats_from_row(row: Sequence[Any]) -> EngramStats:
    """EngramStats from ``queries.PAGE_ENGRAM_STATS`` columns."""
    id_, importance, access_count, last_accessed_at, decay_factor, cluster_id = row
    return EngramStats(
        id=id_,
        importance=float(importance),
        access_count=int(access_count or 0),
        last_accessed_at=parse_ts(last_accessed_at),
        decay_factor=float(decay_factor),
        cluster_id=int(cluster_id if cluster_id is not None else -1),
    )


def cue_row(cue: Cue) -> dict[str, Any]:
    """A cue as a parameter map; the merge key is the normalised name."""
    return {
        "id": cue.id,
        "key": normalise_cue_name(cue.name),
        "name": cue.name,
        "cue_type": cue.cue_type,
        "embedding": vector(cue.embedding),
    }


def cue_from_row(row: Sequence[Any]) -> Cue:
    """A Cue from ``queries.CUE_COLUMNS``."""
    id_, name, cue_type, embedding = row
    emb = None if embedding is None else np.asarray(embedding, dtype=np.float32)
    return Cue(id=id_, name=name, cue_type=cue_type, embedding=emb)


def association_row(assoc: Association, now: datetime) -> dict[str, Any]:
    """An AssociatedWith edge as a parameter map."""
    return {
        "source_id": assoc.source_id,
        "target": assoc.target_id,
        "target_id": assoc.target_id,
        "strength": float(assoc.strength),
        "relation_type": assoc.relation_type,
        "created_at": ts(assoc.created_at or now),
    }


def association_from(
    source: str, target: str, strength: Any, rel: Any, created: Any
) -> Association:
    """An Association from stored edge values."""
    return Association(
        source_id=source,
        target_id=target,
        strength=float(strength),
        relation_type=rel or "semantic",
        created_at=parse_ts(created) if created else None,
    )


def fulltext_query(text: str) -> str | None:
    """A RediSearch OR-query of the words in ``text``, or None when it has no words.

    Stopwords are left out unless the text has nothing else: the index keeps them (a
    short memory may be nothing but common words), so "the" would match, and the
    statement would then filter and sort, nearly every memory.
    """
    words = list(dict.fromkeys(t.lower() for t in _TOKEN.findall(text or "")))
    tokens = [w for w in words if w not in STOPWORDS] or words
    tokens = tokens[:MAX_QUERY_TOKENS]
    return "|".join(tokens) if tokens else None
