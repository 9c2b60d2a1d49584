"""Structured-output schemas of the tools and the annotated argument types."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

from pydantic import Field, WithJsonSchema


class CueOut(TypedDict):
    """A cue (retrieval hook) the memory was linked to."""

    name: str
    type: str


class ConflictOut(TypedDict):
    """An existing memory that a new one may contradict (similar, on the same cues)."""

    id: str
    summary: str
    similarity: float


class FlagOut(TypedDict):
    """Why a memory's content deserves care: ``kind`` ``instruction`` when it reads as an
    instruction to a model (``reason`` quotes what). It is data, never an instruction."""

    kind: str
    reason: str


class RedactedOut(TypedDict):
    """A kind of secret removed before storing (``private``: text between ``<private>``
    tags), and how many; never the secret itself."""

    kind: str
    count: int


class StoredMemoryOut(TypedDict):
    """The memory that was stored.

    ``deduplicated`` is true when the content repeated an existing memory (the same
    text up to case, spacing and punctuation): nothing new was written and this is the
    existing memory, strengthened. ``near_duplicates`` lists existing memories the new
    one closely resembles; it was stored anyway and linked to them (correct or forget
    one if they say the same thing). ``possible_conflicts``
    lists existing memories that may say something else about the same thing (correct
    the outdated one with ``smriti_manage action=correct``).
    """

    id: str
    summary: str
    memory_type: str
    importance: float
    tags: list[str]
    source: str
    created_at: str
    cues: list[CueOut]
    associations: int
    redacted: list[RedactedOut]
    cluster_id: int
    supersedes: str
    origin: str
    principal: str
    deduplicated: bool
    near_duplicates: list[ConflictOut]
    possible_conflicts: list[ConflictOut]


class RecalledMemoryOut(TypedDict):
    """One recalled memory, its score and how it was found; who said it (``origin``,
    ``principal``) and ``flags`` as in ``MemoryOut``; ``uri`` is its MCP resource
    (``memory://<id>``, the memory in full)."""

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
    supersedes: str
    superseded_by: str
    origin: str
    principal: str
    flags: list[FlagOut]
    score: float
    match_type: str
    hop: int
    uri: str


class RecallOut(TypedDict):
    """Recall results, best first.

    ``degraded`` is true when the embedding provider was unavailable and the results
    come from cue-name and lexical matching (and their associations) only; ``warning``
    then says why. ``next_cursor`` (list mode) is passed back as ``cursor`` for the next
    page; null when no more memories follow.
    """

    query: str
    mode: str
    count: int
    results: list[RecalledMemoryOut]
    degraded: bool
    next_cursor: str | None
    warning: NotRequired[str]


class MemoryOut(TypedDict):
    """One memory as stored, with its version links.

    ``supersedes`` is the id of the version this one corrected ("" for a first
    version); ``superseded_by`` and ``superseded_at`` name the correction that replaced
    it ("" and null while it is current). ``origin`` says who said it (``user``,
    ``agent``, ``import:<format>``, ``tool``; "" when stored before origins were
    recorded: unknown), ``principal`` the authenticated caller that stored it ("" for
    none), and ``flags`` mark content that reads as an instruction to a model.
    """

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
    decay_factor: float
    cluster_id: int
    supersedes: str
    superseded_by: str
    superseded_at: str | None
    origin: str
    principal: str
    flags: list[FlagOut]


class AssociationOut(TypedDict):
    """A link between two memories; ``direction`` out: from this memory, in: to it."""

    id: str
    summary: str
    direction: str
    relation: str
    strength: float


class MemoryDetailOut(MemoryOut):
    """A memory with its cues, its associations and its version chain (oldest first,
    this one included)."""

    cues: list[CueOut]
    associations: list[AssociationOut]
    versions: list[str]


class CorrectedOut(TypedDict):
    """A correction: the new version's id, the id it superseded, and the new version."""

    new_id: str
    superseded: str
    memory: StoredMemoryOut
    #: With ``purge``: the earlier versions forgotten and erased.
    purged: NotRequired[list[str]]


class HistoryOut(TypedDict):
    """A memory's version chain, oldest first, and the memories merged into it."""

    memory_id: str
    versions: list[MemoryOut]
    merged: NotRequired[list[MemoryOut]]


class BriefMemoryOut(TypedDict):
    """A memory in a tidy-up listing."""

    id: str
    summary: str
    created_at: str
    access_count: int
    importance: float


class DuplicateGroupOut(TypedDict):
    """Memories that closely resemble each other, newest first, and the cosine of the
    closest pair."""

    similarity: float
    memories: list[BriefMemoryOut]


class DuplicatesOut(TypedDict):
    """Near-duplicate groups (largest first) and stale memories (never recalled in
    ``stale_days``, oldest first)."""

    threshold: float
    groups: list[DuplicateGroupOut]
    more_groups: int
    stale_days: int
    stale: list[BriefMemoryOut]


class MergedOut(TypedDict):
    """The survivor of a merge and the ids merged into it (kept as superseded)."""

    memory: MemoryOut
    merged: list[str]


class RelatedItemOut(TypedDict):
    """A memory linked to another one: how (``relation``), how strongly, and through
    which cue (``via``, for shared_cue)."""

    id: str
    summary: str
    relation: str
    strength: float
    via: str


class RelatedOut(TypedDict):
    """The memories related to ``memory_id``, best first."""

    memory_id: str
    related: list[RelatedItemOut]


class ForgottenOut(TypedDict):
    """The memory that was deleted."""

    id: str
    summary: str
    memory_type: str
    created_at: str


class PurgedOut(TypedDict):
    """A purge: the memory erased from the store and from the backup's history."""

    id: str
    #: False when it had already been forgotten here (only the backup was purged).
    forgotten_now: bool
    erased: bool
    backup: str
    #: What the backup provider rewrote (absent without a backup).
    backup_purge: NotRequired[dict[str, Any]]
    #: The copies a purge cannot reach (other clones, exports made earlier).
    warning: str


class SyncOut(TypedDict):
    """What a backup sync did."""

    provider: str
    pushed: list[str]
    skipped: int
    message: str


class ImportedOut(TypedDict):
    """What an import did (a dry run: would do): records read, memories stored, merged
    into similar ones or already there, associations made, records rejected (with where
    and why), and for a dry run a sample."""

    format: str
    path: str
    dry_run: bool
    records: int
    stored: int
    already_there: int
    merged: int
    associations: int
    redacted: int
    rejected_count: int
    rejected: list[dict[str, str]]
    sample: list[dict[str, Any]]


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
    memory: NotRequired[MemoryDetailOut]
    corrected: NotRequired[CorrectedOut]
    history: NotRequired[HistoryOut]
    updated: NotRequired[MemoryOut]
    related: NotRequired[RelatedOut]
    forgotten: NotRequired[ForgottenOut]
    purged: NotRequired[PurgedOut]
    duplicates: NotRequired[DuplicatesOut]
    merged: NotRequired[MergedOut]
    sync: NotRequired[SyncOut]
    consolidation: NotRequired[ConsolidationOut]
    stats: NotRequired[dict[str, Any]]
    imported: NotRequired[ImportedOut]


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
# smriti_manage's importance and tags change a memory only when given: null is "leave
# as it is", so their defaults are null rather than store's 0.5 and "".
OptionalImportanceArg = Annotated[
    Any,
    WithJsonSchema({"type": ["number", "null"], "minimum": 0.0, "maximum": 1.0}),
    Field(
        description="correct/update: the new importance, 0.0 to 1.0 (omit to keep it; "
        "correct: the new version keeps the old one's)."
    ),
]
OptionalTagsArg = Annotated[
    Any,
    WithJsonSchema({"type": ["string", "null"]}),
    Field(
        description="correct/update: the whole new comma-separated tag list, replacing "
        'the old one (omit to keep it; "" clears it).'
    ),
]
