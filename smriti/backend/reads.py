"""The two coarse reads of the storage contract: ``seek`` and ``neighbourhood``.

One associative recall is four backend round trips, whatever the backend:

1. ``seek(Seek)`` → ``Seeds``: the query's direct hits on every channel at once (vector,
   lexical, cues by name and by embedding, with each matched cue's degree and its
   strongest engrams) and the engram count for IDF weighting;
2. ``neighbourhood(Expand)`` → ``Neighbourhood`` for the first hop's frontier;
3. the same for the second hop;
4. ``get_engrams`` (without embeddings) for the candidate pool.

The engine does all the scoring in between (``smriti.engine.recall``); a backend only
finds and returns rows. A server backend answers each call with one query, using its
native vector and full-text indexes; an embedded one may answer from memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from smriti.model import Association, Engram, Link, origin_matches


@dataclass(frozen=True, slots=True)
class Seek:
    """What one recall looks for. A channel whose input is empty or None is skipped."""

    #: Hits returned per channel (vector and lexical).
    k: int
    #: The query's embedding: the top-``k`` engrams by cosine similarity of at least
    #: ``vector_floor``.
    vector: np.ndarray | None = None
    vector_floor: float = -1.0
    #: Plain user text (never query syntax; the backend escapes or tokenises it): the
    #: top-``k`` engrams by lexical relevance over content, summary and tags.
    text: str | None = None
    #: ``memory_type`` filter for the vector and lexical channels, applied before the cut.
    memory_type: str | None = None
    #: Normalised cue names matched exactly (similarity 1.0).
    cue_names: Sequence[str] = ()
    #: One row per query cue: the ``cue_neighbours`` nearest cues of each row, kept when
    #: their cosine similarity is at least ``cue_similarity``.
    cue_vectors: np.ndarray | None = None
    cue_neighbours: int = 3
    cue_similarity: float = 0.8
    #: Engrams returned per matched cue, most important first (hub cues stay bounded).
    cue_fanout: int = 50


@dataclass(slots=True)
class CueMatch:
    """A stored cue the query matched."""

    cue_id: str
    #: 1.0 for a name match, else the best cosine similarity to a query cue.
    similarity: float
    #: How many engrams the cue encodes.
    degree: int
    #: Up to ``Seek.cue_fanout`` (engram id, EncodedBy strength), most important first.
    engrams: list[tuple[str, float]] = field(default_factory=list)
    #: The stored cue's type (recall matches ``entity`` cues by name only).
    cue_type: str = ""


@dataclass(slots=True)
class Seeds:
    """The answer to a ``Seek``; lists are best first."""

    vector: list[tuple[str, float]] = field(default_factory=list)
    text: list[tuple[str, float]] = field(default_factory=list)
    cues: list[CueMatch] = field(default_factory=list)
    #: How many engrams the user has (for IDF; may be a few seconds old on a shared server).
    total: int = 0


@dataclass(frozen=True, slots=True)
class Expand:
    """The neighbourhood asked for: one hop around ``ids``."""

    ids: Sequence[str]
    #: AssociatedWith edges per engram and direction, strongest first (0: none).
    edges: int
    #: Cues of ``ids`` encoding at most this many engrams have their engrams returned.
    cue_max_degree: int
    #: Engrams returned per such cue, most important first.
    engrams_per_cue: int


@dataclass(slots=True)
class Neighbourhood:
    """The answer to an ``Expand``."""

    #: Edges touching ``ids`` in either direction (up to ``edges`` per engram and
    #: direction).
    associations: list[Association] = field(default_factory=list)
    #: Every EncodedBy edge of ``ids``.
    links: list[Link] = field(default_factory=list)
    #: The degree of every cue in ``links``.
    degrees: dict[str, int] = field(default_factory=dict)
    #: For the cues of ``links`` with a degree of at most ``cue_max_degree``: (engram id,
    #: EncodedBy strength), most important first.
    members: dict[str, list[tuple[str, float]]] = field(default_factory=dict)


#: Where a page of a listing ends: the (last_accessed_at, created_at, id) of its last
#: engram. The next page starts strictly after it in listing order.
ListKey = tuple[datetime, datetime, str]


def list_key(engram: Engram) -> ListKey:
    """The listing-order key of ``engram`` (see ``Listing``)."""
    return (engram.last_accessed_at, engram.created_at, engram.id)


@dataclass(frozen=True, slots=True)
class Listing:
    """A filtered page of a user's engrams, for ``list`` mode, filters and ``related``.

    Order: most recently accessed first, then newest created first, then id descending
    (a total order, so pages neither repeat nor skip an engram that did not change in
    between). Every filter is applied before ``limit``; empty or None means no filter.
    """

    limit: int
    memory_type: str | None = None
    #: Tags as stored (already normalised by the engine): an engram matches when it has
    #: any of them, or every one of them when ``all_tags``.
    tags: Sequence[str] = ()
    all_tags: bool = False
    #: ``since <= created_at < until`` (aware UTC datetimes).
    since: datetime | None = None
    until: datetime | None = None
    #: False leaves out engrams whose ``superseded_by`` is set.
    include_superseded: bool = True
    #: Only engrams in this cluster.
    cluster_id: int | None = None
    #: Only engrams of this origin: an exact value (``user``, ``import:smriti``) or a
    #: prefix ending in ``:`` (``import:``); see ``smriti.model.origin_matches``.
    origin: str | None = None
    #: Only engrams strictly after this key in listing order (the previous page's last).
    after: ListKey | None = None

    def matches(self, e: Engram) -> bool:
        """Whether ``e`` passes every filter (not ``after`` or ``limit``): the reference
        semantics a backend's query must reproduce."""
        if self.memory_type is not None and e.memory_type != self.memory_type:
            return False
        if self.tags:
            have = set(e.tags)
            hits = [t in have for t in self.tags]
            if not (all(hits) if self.all_tags else any(hits)):
                return False
        if self.since is not None and e.created_at < self.since:
            return False
        if self.until is not None and e.created_at >= self.until:
            return False
        if not self.include_superseded and e.superseded_by:
            return False
        if self.origin is not None and not origin_matches(e.origin, self.origin):
            return False
        return self.cluster_id is None or e.cluster_id == self.cluster_id

    def is_filtered(self) -> bool:
        """True when a filter other than ``memory_type`` is set."""
        return bool(
            self.tags
            or self.since is not None
            or self.until is not None
            or not self.include_superseded
            or self.cluster_id is not None
            or self.origin is not None
        )


def listing_sorted(engrams: Sequence[Engram], listing: Listing) -> list[Engram]:
    """Reference implementation of a listing over ``engrams`` held in memory."""
    chosen = [e for e in engrams if listing.matches(e)]
    if listing.after is not None:
        after = listing.after
        chosen = [e for e in chosen if list_key(e) < after]
    chosen.sort(key=list_key, reverse=True)
    return chosen[: max(0, listing.limit)]
