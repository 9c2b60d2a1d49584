"""The data model: engrams (memories), cues, associations and recall results."""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal, get_args

import numpy as np

from smriti.instructions import instruction_flags

MemoryType = Literal["episodic", "semantic", "procedural"]
CueType = Literal["entity", "keyword", "concept", "context"]

MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
_ORIGIN_FORMAT = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
CUE_TYPES: tuple[str, ...] = get_args(CueType)
UNASSIGNED_CLUSTER = -1

#: The origins a memory can have: said by the user, written by the agent, brought in
#: by an import (``import:<format>``, e.g. ``import:smriti``) or made by Smriti itself.
ORIGIN_USER = "user"
ORIGIN_AGENT = "agent"
ORIGIN_TOOL = "tool"
ORIGIN_IMPORT_PREFIX = "import:"
ORIGINS: tuple[str, ...] = (ORIGIN_USER, ORIGIN_AGENT, ORIGIN_TOOL)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (never naive local time)."""
    return datetime.now(UTC)


def new_id() -> str:
    """A fresh random identifier for an engram or cue."""
    return uuid.uuid4().hex


def clamp01(value: float) -> float:
    """Clamp a float into [0, 1]."""
    return min(1.0, max(0.0, float(value)))


def normalise_cue_name(name: str) -> str:
    """The merge key of a cue: NFKC, lower-case, trimmed, inner whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", name).lower().split())


def check_origin(origin: str) -> str:
    """``origin`` if it is a valid origin (``user``, ``agent``, ``tool`` or
    ``import:<format>`` with a short lower-case format name), else ValueError."""
    if origin in ORIGINS:
        return origin
    fmt = origin.removeprefix(ORIGIN_IMPORT_PREFIX)
    if origin.startswith(ORIGIN_IMPORT_PREFIX) and _ORIGIN_FORMAT.fullmatch(fmt):
        return origin
    raise ValueError(
        f"origin {origin!r} is not one of user, agent, tool or import:<format> "
        "(a format name of lower-case letters, digits, '-' or '_', up to 32 characters)"
    )


def origin_matches(origin: str, wanted: str) -> bool:
    """Whether a memory of ``origin`` passes an origin filter: ``wanted`` is an exact
    origin, or a prefix ending in ``:`` (``import:`` matches every import)."""
    return origin.startswith(wanted) if wanted.endswith(":") else origin == wanted


def as_vector(values: object) -> np.ndarray:
    """Coerce a sequence of numbers to a float32 vector."""
    return np.asarray(values, dtype=np.float32).reshape(-1)


@dataclass(slots=True)
class Engram:
    """One memory: its text, metadata, embedding and cluster."""

    id: str
    content: str
    summary: str
    memory_type: str
    importance: float
    created_at: datetime
    last_accessed_at: datetime
    access_count: int = 0
    decay_factor: float = 1.0
    embedding: np.ndarray | None = None
    source: str = ""
    tags: list[str] = field(default_factory=list)
    cluster_id: int = UNASSIGNED_CLUSTER
    #: The id of the memory this one corrected (``smriti_manage action=correct``); set
    #: when it is stored and never changed. Empty for a first version.
    supersedes: str = ""
    #: The id of the memory that corrected this one, and when; empty and None while it
    #: is current. A superseded memory is kept (its history) but left out of recall
    #: unless asked for.
    superseded_by: str = ""
    superseded_at: datetime | None = None
    #: Who said it: ``user``, ``agent``, ``import:<format>`` or ``tool`` (see
    #: ``ORIGINS``); set when the memory is stored and never changed. Empty for a memory
    #: stored before origins were recorded: unknown, not guessed.
    origin: str = ""
    #: The authenticated caller that stored it (an HTTP server's verified principal);
    #: empty when the store had no authenticated caller (stdio, CLI, unauthenticated).
    principal: str = ""

    @property
    def is_superseded(self) -> bool:
        """True once a correction replaced this memory."""
        return bool(self.superseded_by)

    def to_dict(self) -> dict[str, object]:
        """The fields every tool result shows of a memory (no embedding), with
        ``flags`` on content that reads as an instruction to a model
        (``smriti.instructions``)."""
        return {
            "id": self.id,
            "content": self.content,
            "summary": self.summary,
            "memory_type": self.memory_type,
            "importance": round(self.importance, 4),
            "tags": list(self.tags),
            "source": self.source,
            "created_at": self.created_at.isoformat(),
            "last_accessed_at": self.last_accessed_at.isoformat(),
            "access_count": self.access_count,
            "cluster_id": self.cluster_id,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "origin": self.origin,
            "principal": self.principal,
            "flags": instruction_flags(self.content),
        }

    def with_changes(self, **changes: object) -> Engram:
        """A copy with some fields replaced."""
        return replace(self, **changes)


@dataclass(slots=True, frozen=True)
class Provenance:
    """Who says a memory being stored: its ``origin`` and the authenticated
    ``principal`` (see ``Engram``); both already validated."""

    origin: str = ""
    principal: str = ""


@dataclass(slots=True)
class Cue:
    """A retrieval cue (entity, keyword, concept or context) shared between memories."""

    id: str
    name: str
    cue_type: str
    embedding: np.ndarray | None = None


@dataclass(slots=True, frozen=True)
class CueRef:
    """A cue as extracted from text, before it is matched to a stored Cue."""

    name: str
    cue_type: str = "keyword"


@dataclass(slots=True)
class Extraction:
    """What a cue extractor returns for a text."""

    summary: str
    memory_type: str
    cues: list[CueRef]


@dataclass(slots=True, frozen=True)
class Association:
    """A directed AssociatedWith edge between two engrams."""

    source_id: str
    target_id: str
    strength: float
    relation_type: str = "semantic"
    created_at: datetime | None = None


@dataclass(slots=True, frozen=True)
class Link:
    """An EncodedBy edge seen from the engram side: engram -> cue with a strength."""

    engram_id: str
    cue_id: str
    strength: float = 1.0


@dataclass(slots=True, frozen=True)
class CoOccurrence:
    """A CoOccurs edge between two cues; strength counts co-occurrences."""

    source_id: str
    target_id: str
    strength: float


@dataclass(slots=True, frozen=True)
class EngramUpdate:
    """A partial update of one engram's mutable fields (None = leave unchanged)."""

    id: str
    access_count: int | None = None
    last_accessed_at: datetime | None = None
    decay_factor: float | None = None
    cluster_id: int | None = None
    importance: float | None = None
    #: The whole new tag list (not a difference).
    tags: list[str] | None = None
    #: Set together when a correction supersedes the engram.
    superseded_by: str | None = None
    superseded_at: datetime | None = None


@dataclass(slots=True)
class RecallResult:
    """One recalled memory with its score and how it was found."""

    engram: Engram
    score: float
    match_type: str
    hop: int = 0

    def to_dict(self) -> dict[str, object]:
        """The tool-facing representation (no embedding)."""
        return {
            **self.engram.to_dict(),
            "score": round(self.score, 6),
            "match_type": self.match_type,
            "hop": self.hop,
        }
