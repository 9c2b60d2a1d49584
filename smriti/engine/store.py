"""The store pipeline (SPEC §5): extract, embed, associate, write atomically."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from smriti import secrets
from smriti.backend import Expand
from smriti.engine import duplicates
from smriti.engine.contiguity import FOLLOWS
from smriti.errors import InvalidInput, ProviderError
from smriti.model import (
    MEMORY_TYPES,
    UNASSIGNED_CLUSTER,
    Association,
    Cue,
    CueRef,
    Engram,
    EngramUpdate,
    Extraction,
    Provenance,
    new_id,
    normalise_cue_name,
    utcnow,
)

if TYPE_CHECKING:
    from smriti.engine.core import Engine
    from smriti.requests import StoreRequest

MAX_CUES = 10
MAX_CUE_CHARS = 120


@dataclass(slots=True)
class StoreOutcome:
    """The stored engram, its cues and how many associations it got.

    ``deduplicated``: nothing was written; ``engram`` is the existing memory the content
    repeats, strengthened. ``near_duplicates``: (engram, cosine) of existing memories
    the new one closely resembles (it was stored, and linked to them). ``conflicts``:
    (engram, cosine) of existing memories that may say something else about the same
    thing (``smriti.engine.duplicates``).
    """

    engram: Engram
    cues: list[Cue] = field(default_factory=list)
    associations: int = 0
    #: What ``smriti.secrets.screen`` removed: ``[{"kind", "count"}]``, never the text.
    redacted: list[dict[str, object]] = field(default_factory=list)
    deduplicated: bool = False
    conflicts: list[tuple[Engram, float]] = field(default_factory=list)
    near_duplicates: list[tuple[Engram, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The tool-facing representation."""
        e = self.engram
        return {
            "id": e.id,
            "summary": e.summary,
            "memory_type": e.memory_type,
            "importance": e.importance,
            "tags": list(e.tags),
            "source": e.source,
            "created_at": e.created_at.isoformat(),
            "cues": [{"name": c.name, "type": c.cue_type} for c in self.cues],
            "associations": self.associations,
            "redacted": self.redacted,
            "cluster_id": e.cluster_id,
            "supersedes": e.supersedes,
            "origin": e.origin,
            "principal": e.principal,
            "deduplicated": self.deduplicated,
            "near_duplicates": [
                {"id": c.id, "summary": c.summary, "similarity": round(sim, 4)}
                for c, sim in self.near_duplicates
            ],
            "possible_conflicts": [
                {"id": c.id, "summary": c.summary, "similarity": round(sim, 4)}
                for c, sim in self.conflicts
            ],
        }

    def reporting(self, redacted: list[dict[str, object]]) -> StoreOutcome:
        """This outcome, saying what was redacted from the content that produced it."""
        self.redacted = redacted
        return self


def clean_cues(refs: list[CueRef], tags: list[str]) -> list[CueRef]:
    """Normalised, de-duplicated cues (tags become context cues), at most MAX_CUES + tags."""
    out: dict[str, CueRef] = {}
    for ref in refs:
        name = normalise_cue_name(ref.name)[:MAX_CUE_CHARS]
        if name and name not in out and len(out) < MAX_CUES:
            out[name] = CueRef(name, ref.cue_type)
    for tag in tags:
        name = normalise_cue_name(tag)[:MAX_CUE_CHARS]
        if name and name not in out:
            out[name] = CueRef(name, "context")
    return list(out.values())


@dataclass(slots=True, frozen=True)
class Correction:
    """What a store that corrects ``old`` adds: the version link and carried edges."""

    old: Engram
    #: Edges from the new version, besides its own association search's.
    edges: tuple[Association, ...] = ()


def store(
    engine: Engine, request: StoreRequest, correction: Correction | None = None
) -> StoreOutcome:
    """Remember what ``request`` asks (checked when it was built, at the edge); a
    failure leaves nothing stored.

    ``request.memory_id`` (optional) is the id the new memory gets. A store repeated with
    the same id (a client sending its request again after the owner process died before
    answering) finds the memory already there and returns it instead of storing it
    twice; the id is checked before anything is written, and the memory is written
    atomically, so either the first attempt is seen whole or the second one stores it.

    ``request.occurred_at`` (optional) is when what the memory records happened, for
    events stored after the fact (an imported conversation history): it becomes the
    memory's ``created_at``, which the ``since``/``until`` filters and the dates named
    in a query (``smriti.engine.when``) read. It may not lie in the future.

    ``request.origin`` and ``request.principal`` record who said it. A repeat keeps the
    existing memory's.

    Content that repeats an existing memory (the same text up to case, spacing and
    punctuation) is not stored again: the existing one is strengthened and returned
    with ``deduplicated``. Anything else is stored; existing memories it closely
    resembles are linked to it and reported as ``near_duplicates``
    (``smriti.engine.duplicates``). A ``correction`` (``smriti.engine.versions``) is
    never a duplicate: it becomes a new version of ``correction.old``.
    """
    weight = request.importance
    # Before anything is derived from the text (cues, embedding, dedup key, write).
    text, tag_list, origin, hidden = secrets.screen_memory(
        engine.settings.secrets, request.content, list(request.tags), request.source
    )
    happened = request.occurred_at
    if happened is not None and happened > utcnow():
        raise InvalidInput(f"occurred_at ({happened.isoformat()}) lies in the future")
    provenance = Provenance(request.origin, request.principal)
    chosen_id = new_id() if request.memory_id is None else request.memory_id
    existing = None if request.memory_id is None else stored_outcome(engine, chosen_id)
    if existing is not None:
        return existing.reporting(hidden)

    extraction = engine.extractor.extract(text)
    refs = clean_cues(extraction.cues, tag_list)
    vector, cues = embed_memory(engine, text, refs)
    with engine.content_lock(duplicates.normalised_text(text)):
        near = nearest(engine, vector)
        hits = [(e.id, sim) for e, sim in near]
        loaded = {e.id: e for e, _ in near}
        if correction is not None:
            hits = [(i, sim) for i, sim in hits if i != correction.old.id]
            found = duplicates.Neighbours(hits, loaded)
        else:
            specific = [r.name for r in refs if r.cue_type != "context"]
            found = duplicates.examine(engine, text, hits, loaded, specific)
            if found.duplicate is not None:
                return deduplicated(engine, found.duplicate, weight, tag_list).reporting(hidden)
        return _write(engine, text, weight, tag_list, origin, chosen_id, extraction, vector,
                      cues, found, correction, happened, provenance).reporting(hidden)  # fmt: skip


def _write(
    engine: Engine,
    text: str,
    weight: float,
    tag_list: list[str],
    origin: str,
    chosen_id: str,
    extraction: Extraction,
    vector: np.ndarray,
    cues: list[Cue],
    found: duplicates.Neighbours,
    correction: Correction | None,
    happened: datetime | None = None,
    provenance: Provenance | None = None,
) -> StoreOutcome:
    now = utcnow()
    memory_type = extraction.memory_type if extraction.memory_type in MEMORY_TYPES else "semantic"
    engram = Engram(
        id=chosen_id,
        content=text,
        summary=(extraction.summary or text).strip()[:1000],
        memory_type=memory_type,
        importance=weight,
        created_at=now if happened is None else happened,
        last_accessed_at=now,
        embedding=vector,
        source=origin,
        tags=tag_list,
        cluster_id=UNASSIGNED_CLUSTER,
        supersedes=correction.old.id if correction is not None else "",
        origin=provenance.origin if provenance is not None else "",
        principal=provenance.principal if provenance is not None else "",
    )
    conflicts = found.conflicts or []
    near = found.near_duplicates or []
    # A correction takes its old version's place; it is not the next thing said.
    previous = engine.timeline.advance(engram.id, now) if correction is None else None

    def search() -> tuple[list[Association], int]:
        linked, cluster = associate(engine, found.hits, found.engrams)
        edges = {t: Association(engram.id, t, sim, "semantic", now) for t, sim in linked}
        for other, sim in near:
            edges[other.id] = Association(engram.id, other.id, sim, duplicates.NEAR_DUPLICATE, now)
        # Only a memory that says something changed outranks the one it contradicts:
        # look-alike statements are reported, but ranked on their own merits.
        for other, sim in conflicts if duplicates.announces_change(text) else ():
            edges[other.id] = Association(engram.id, other.id, sim, "conflicts", now)
        if correction is not None:
            for edge in correction.edges:
                edges.setdefault(edge.target_id, replace(edge, source_id=engram.id, created_at=now))
            old = correction.old
            edges[old.id] = Association(engram.id, old.id, 1.0, "supersedes", now)
            if cluster == UNASSIGNED_CLUSTER:
                cluster = old.cluster_id
        # One edge per pair: a previous memory the new one is already associated with
        # keeps that (semantic) link.
        if previous is not None:
            edges.setdefault(previous, Association(engram.id, previous, 1.0, FOLLOWS, now))
        return list(edges.values()), cluster

    # The engine finds the associations, then the backend writes: it never calls back.
    edges, cluster = search()
    stored = engine.backend.add_memory(replace(engram, cluster_id=cluster), cues, edges)
    engine.after_write(stored.cues)
    return StoreOutcome(
        stored.engram, stored.cues, len(edges), conflicts=conflicts, near_duplicates=near
    )


def deduplicated(engine: Engine, existing: Engram, weight: float, tags: list[str]) -> StoreOutcome:
    """Strengthen ``existing`` as a recall would, raise its importance to ``weight`` and
    add ``tags``; nothing new is stored."""
    now = utcnow()
    merged = list(dict.fromkeys([*existing.tags, *tags]))
    update = EngramUpdate(
        existing.id,
        access_count=existing.access_count + 1,
        last_accessed_at=now,
        decay_factor=min(1.0, existing.decay_factor + 0.05),
        importance=max(existing.importance, weight) if weight > existing.importance else None,
        tags=merged if merged != existing.tags else None,
    )
    engine.backend.update_engrams([update])
    engine.dirty.set()
    changed = existing.with_changes(
        access_count=update.access_count,
        last_accessed_at=now,
        decay_factor=update.decay_factor,
        importance=max(existing.importance, weight),
        tags=merged,
    )
    outcome = stored_outcome(engine, existing.id) or StoreOutcome(changed)
    outcome.engram = changed
    outcome.deduplicated = True
    return outcome


def nearest(engine: Engine, vector: np.ndarray) -> list[tuple[Engram, float]]:
    """The new memory's nearest existing memories above the lowest bar any check needs,
    read with the fields those checks use (one round trip on a server backend), each
    with its cosine on the engine's common scale (``Engine.scale``), where the
    thresholds are."""
    k = max(engine.settings.association_top_k, duplicates.NEIGHBOURS)
    scale = engine.scale
    hits = engine.backend.nearest_engrams(vector, k, scale.raw(duplicates.floor(engine)))
    return [(e, scale.common(float(score))) for e, score in hits]


def stored_outcome(engine: Engine, memory_id: str) -> StoreOutcome | None:
    """The outcome of an earlier store of ``memory_id``, or None if it is not stored."""
    found = engine.backend.get_engrams([memory_id])
    if not found:
        return None
    around = engine.backend.neighbourhood(
        Expand([memory_id], engine.settings.association_top_k, 0, 0)
    )
    cues = engine.backend.get_cues_by_id(list({link.cue_id for link in around.links}))
    outgoing = sum(1 for a in around.associations if a.source_id == memory_id)
    return StoreOutcome(found[0], cues, outgoing)


def embed_memory(engine: Engine, text: str, refs: list[CueRef]) -> tuple[np.ndarray, list[Cue]]:
    """Embed the content and any cue not yet known, in one request.

    When the embedder fails (ProviderError after its retries), the store is refused
    before anything is written, with a message saying so and asking for a retry. A
    memory without an embedding would be invisible to vector recall and association
    for good, and a durable queue of un-embedded memories would be a second store to
    keep consistent; the caller (an agent, a script) still holds the content and can
    simply call again, so refusing loses nothing silently and needs no queue.
    """
    known = engine.cue_vectors(r.name for r in refs)
    missing = [r.name for r in refs if r.name not in known]
    try:
        vectors = engine.embed([text, *missing])
    except ProviderError as exc:
        raise ProviderError(
            f"the memory was NOT stored (nothing was saved): {exc}. "
            "Try again when the embedding provider is reachable."
        ) from exc
    for name, vec in zip(missing, vectors[1:], strict=True):
        known[name] = vec
    cues = [Cue(new_id(), r.name, r.cue_type, known[r.name]) for r in refs]
    return vectors[0], cues


def associate(
    engine: Engine, hits: list[tuple[str, float]], loaded: Mapping[str, Engram] | None = None
) -> tuple[list[tuple[str, float]], int]:
    """The top-k of ``hits`` above the association threshold, and the strongest one's
    cluster (from ``loaded`` when the store's nearest-neighbour read returned it)."""
    s = engine.settings
    if s.association_top_k == 0:
        return [], UNASSIGNED_CLUSTER
    links = [(eid, sim) for eid, sim in hits if sim > s.association_threshold]
    links = links[: s.association_top_k]
    if not links:
        return [], UNASSIGNED_CLUSTER
    first = links[0][0]
    if loaded is not None and first in loaded:
        return links, loaded[first].cluster_id
    strongest = engine.backend.get_engrams([first], embeddings=False)
    return links, strongest[0].cluster_id if strongest else UNASSIGNED_CLUSTER
