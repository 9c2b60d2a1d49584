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

import numpy as np

from smriti.model import Association, Link


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
