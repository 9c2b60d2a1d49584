"""Structured-output schemas of the tools and the annotated argument types."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

from pydantic import Field, WithJsonSchema


class CueOut(TypedDict):
    """A cue (retrieval hook) the memory was linked to."""

    name: str
    type: str


class StoredMemoryOut(TypedDict):
    """The memory that was stored."""

    id: str
    summary: str
    memory_type: str
    importance: float
    tags: list[str]
    source: str
    created_at: str
    cues: list[CueOut]
    associations: int
    cluster_id: int


class RecalledMemoryOut(TypedDict):
    """One recalled memory, its score and how it was found."""

    id: str
    content: str
    summary: str
    memory_type: str
    importance: float
    tags: list[str]
    source: str
    created_at: str
    last_accessed_at: str
    access_count: int
    cluster_id: int
    score: float
    match_type: str
    hop: int


class RecallOut(TypedDict):
    """Recall results, best first.

    ``degraded`` is true when the embedding provider was unavailable and the results
    come from cue-name and lexical matching (and their associations) only; ``warning``
    then says why.
    """

    query: str
    mode: str
    count: int
    results: list[RecalledMemoryOut]
    degraded: bool
    warning: NotRequired[str]


class ForgottenOut(TypedDict):
    """The memory that was deleted."""

    id: str
    summary: str
    memory_type: str
    created_at: str


class SyncOut(TypedDict):
    """What a backup sync did."""

    provider: str
    pushed: list[str]
    skipped: int
    message: str


class ConsolidationOut(TypedDict):
    """What a consolidation run did."""

    decayed: int
    pruned: int
    strengthened: int
    orphan_cues_removed: int
    clusters: int
    reclustered: NotRequired[int]
    indexes_created: list[str]
    seconds: float


class ManageOut(TypedDict):
    """The outcome of a management action; one of the optional keys is set."""

    action: str
    message: str
    forgotten: NotRequired[ForgottenOut]
    sync: NotRequired[SyncOut]
    consolidation: NotRequired[ConsolidationOut]
    stats: NotRequired[dict[str, Any]]


# Numbers arrive unconverted (``Any``) so that this edge, not the SDK's coercion, decides
# what a bad value means: "abc", NaN, true and 1e309 each get a message naming the
# parameter. The published schema still says "number"/"integer".
ImportanceArg = Annotated[
    Any,
    WithJsonSchema({"type": "number", "minimum": 0.0, "maximum": 1.0}),
    Field(
        description="How important the memory is, 0.0 (trivia) to 1.0 (critical). "
        "Important memories rank higher and are never pruned by decay."
    ),
]
# Agents sometimes send tags as a JSON array although the schema says string; accept both
# (the engine validates either form).
TagsArg = Annotated[
    Any,
    WithJsonSchema({"type": "string"}),
    Field(description="Comma-separated tags, e.g. 'work, project-x'."),
]
LimitArg = Annotated[
    Any,
    WithJsonSchema({"type": "integer", "minimum": 1}),
    Field(description="Maximum number of memories to return (at least 1)."),
]
