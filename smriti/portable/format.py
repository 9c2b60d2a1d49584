"""The export file format: constants, reports, record codecs, digests and file handling.

See :mod:`smriti.portable` for the format itself.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from smriti.model import Association, CoOccurrence, Cue, Engram, Link
from smriti.private import make_private

FORMAT = "smriti-export"
#: Version 2 added the engram version fields (``supersedes``, ``superseded_by``,
#: ``superseded_at``); version 1 files are still read (the fields take their defaults).
VERSION = 2
#: Every version this Smriti reads.
READABLE_VERSIONS = (1, 2)
#: The engram fields added by version 2, written only when set.
VERSION_FIELDS = ("supersedes", "superseded_by", "superseded_at")
#: Who said it (``origin``, ``principal``): optional, written only when set, read as ""
#: when absent; a version 2 reader that predates them skips them.
ORIGIN_FIELDS = ("origin", "principal")
VECTOR_ENCODING = "base64-float32-le"
EMBEDDING_MODEL_KEY = "embedding_model"
#: Metadata carried by an export (Leiden's tuned resolution keeps clusters stable).
EXPORTED_META_KEYS = ("leiden_state",)
KINDS = ("engrams", "cues", "links", "associations", "cooccurrences")
#: Record kind of a forgotten memory (``smriti.portable.tombstones``); files without
#: any are read as before, and older readers skip the kind with a warning.
TOMBSTONE = "tombstone"


@dataclass(slots=True)
class ExportReport:
    """What ``export_store`` wrote."""

    path: str
    user: str
    embedding_model: str | None
    dims: int | None
    counts: dict[str, int]
    skipped_edges: int = 0
    #: Tombstone records written (forgotten memories, see ``smriti.portable.tombstones``).
    tombstones: int = 0
    bytes: int = 0
    seconds: float = 0.0
    #: Order-independent digest of every line after the header (see ``LineDigest``).
    body_digest: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the CLI and tools."""
        return asdict(self)


@dataclass(slots=True)
class ImportReport:
    """What ``import_store`` loaded."""

    path: str
    source_user: str
    source_model: str | None
    target_model: str | None
    re_embedded: bool
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    merged_cues: int = 0
    #: Tombstone records read, and memories left out or deleted because of them.
    tombstones: int = 0
    forgotten: int = 0
    seconds: float = 0.0
    #: Order-independent digest of every line after the header (see ``LineDigest``).
    body_digest: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the CLI and tools."""
        return asdict(self)


# -- record codecs -----------------------------------------------------------------------
def encode_vector(vector: np.ndarray | None) -> str | None:
    """Base64 of the vector as little-endian float32 bytes (None stays None)."""
    if vector is None:
        return None
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(value: object) -> np.ndarray | None:
    """A float32 vector from base64 float32 bytes or from a list of numbers."""
    if value is None:
        return None
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float32)
    raise ValueError(f"embedding must be base64 text or a list of numbers, not {type(value)}")


def ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def parse_ts(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"timestamp must be ISO 8601 text, got {value!r}")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no UTC offset (naive times are ambiguous)")
    return parsed.astimezone(UTC)


def engram_record(e: Engram, vectors: str = "base64") -> dict[str, Any]:
    """The export record of an engram (``vectors``: ``base64`` or ``list``)."""
    emb = e.embedding
    record: dict[str, Any] = {
        "kind": "engram",
        "id": e.id,
        "content": e.content,
        "summary": e.summary,
        "memory_type": e.memory_type,
        "importance": float(e.importance),
        "access_count": int(e.access_count),
        "created_at": ts(e.created_at),
        "last_accessed_at": ts(e.last_accessed_at),
        "decay_factor": float(e.decay_factor),
        "source": e.source,
        "tags": list(e.tags),
        "cluster_id": int(e.cluster_id),
        "embedding": _vector_field(emb, vectors),
    }
    # Only when set: the line of a memory that was never corrected stays byte-identical
    # to version 1, so an upgraded machine's unchanged store exports its old snapshot's
    # lines (same body digest, nothing pushed) and the file stays small.
    if e.supersedes:
        record["supersedes"] = e.supersedes
    if e.superseded_by:
        record["superseded_by"] = e.superseded_by
    if e.superseded_at is not None:
        record["superseded_at"] = ts(e.superseded_at)
    # Who said it, likewise only when known: optional fields that a reader of an older
    # Smriti skips, so the format version stays.
    if e.origin:
        record["origin"] = e.origin
    if e.principal:
        record["principal"] = e.principal
    return record


def _vector_field(vector: np.ndarray | None, vectors: str) -> object:
    if vector is None or vectors == "base64":
        return encode_vector(vector)
    return [float(x) for x in np.asarray(vector, dtype=np.float32)]


def engram_from_record(r: dict[str, Any]) -> Engram:
    """An Engram from its export record."""
    return Engram(
        id=str(r["id"]),
        content=str(r["content"]),
        summary=str(r.get("summary", "")),
        memory_type=str(r["memory_type"]),
        importance=float(r["importance"]),
        created_at=parse_ts(r["created_at"]),
        last_accessed_at=parse_ts(r["last_accessed_at"]),
        access_count=int(r.get("access_count", 0)),
        decay_factor=float(r.get("decay_factor", 1.0)),
        embedding=decode_vector(r.get("embedding")),
        source=str(r.get("source", "")),
        tags=[str(t) for t in r.get("tags", [])],
        cluster_id=int(r.get("cluster_id", -1)),
        # Absent in version 1 files and in records of memories never corrected.
        supersedes=str(r.get("supersedes") or ""),
        superseded_by=str(r.get("superseded_by") or ""),
        superseded_at=parse_ts(r["superseded_at"]) if r.get("superseded_at") else None,
        # Absent in files written before origins were recorded: unknown.
        origin=str(r.get("origin") or ""),
        principal=str(r.get("principal") or ""),
    )


def cue_record(c: Cue, vectors: str = "base64") -> dict[str, Any]:
    """The export record of a cue."""
    return {
        "kind": "cue",
        "id": c.id,
        "name": c.name,
        "cue_type": c.cue_type,
        "embedding": _vector_field(c.embedding, vectors),
    }


def cue_from_record(r: dict[str, Any]) -> Cue:
    """A Cue from its export record."""
    return Cue(str(r["id"]), str(r["name"]), str(r["cue_type"]), decode_vector(r.get("embedding")))


def link_record(lk: Link) -> dict[str, Any]:
    """The export record of an EncodedBy edge."""
    return {
        "kind": "link",
        "engram_id": lk.engram_id,
        "cue_id": lk.cue_id,
        "strength": float(lk.strength),
    }


def association_record(a: Association) -> dict[str, Any]:
    """The export record of an AssociatedWith edge."""
    return {
        "kind": "association",
        "source_id": a.source_id,
        "target_id": a.target_id,
        "strength": float(a.strength),
        "relation_type": a.relation_type,
        "created_at": ts(a.created_at) if a.created_at else None,
    }


def association_from_record(r: dict[str, Any]) -> Association:
    """An Association from its export record."""
    created = r.get("created_at")
    return Association(
        str(r["source_id"]),
        str(r["target_id"]),
        float(r["strength"]),
        str(r.get("relation_type", "semantic")),
        parse_ts(created) if created else None,
    )


def cooccurrence_record(c: CoOccurrence) -> dict[str, Any]:
    """The export record of a CoOccurs edge."""
    return {
        "kind": "cooccurrence",
        "source_id": c.source_id,
        "target_id": c.target_id,
        "strength": float(c.strength),
    }


class LineDigest:
    """An order-independent digest of a multiset of lines (sum of SHA-256 mod 2**256).

    Two exports of the same graph give the same digest even when a backend returns
    edges in another order, so an unchanged store is recognised without sorting.
    """

    def __init__(self) -> None:
        self.total = 0
        self.count = 0

    def update(self, line: str) -> None:
        """Add one line (with its newline)."""
        value = int.from_bytes(hashlib.sha256(line.encode("utf-8")).digest(), "big")
        self.total = (self.total + value) % (1 << 256)
        self.count += 1

    def hexdigest(self) -> str:
        """``{line count}:{sum as 64 hex digits}``."""
        return f"{self.count}:{self.total:064x}"


# -- files -------------------------------------------------------------------------------
@contextmanager
def open_text(path: Path, mode: str, gzipped: bool = False) -> Iterator[IO[str]]:
    """Open for text ``r``/``w``; gzip when ``gzipped`` (writing) or gzip bytes (reading)."""
    if mode == "w":
        gz = gzipped
        make_private(path)  # an export holds every memory: its owner's eyes only
    else:
        with open(path, "rb") as probe:
            gz = probe.read(2) == b"\x1f\x8b"
    if gz:
        handle: IO[str] = gzip.open(  # noqa: SIM115
            path, mode + "t", compresslevel=6, encoding="utf-8", newline="\n"
        )
    else:
        handle = open(path, mode, encoding="utf-8", newline="\n")  # noqa: SIM115
    with handle:
        yield handle


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(record: dict[str, Any]) -> str:
    """One compact JSON line (one shared encoder: building one per line costs half the time)."""
    return _ENCODER.encode(record) + "\n"
