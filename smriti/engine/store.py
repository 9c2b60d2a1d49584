"""The store pipeline (SPEC §5): extract, embed, associate, write atomically."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from smriti import validation
from smriti.errors import ProviderError
from smriti.model import (
    MEMORY_TYPES,
    UNASSIGNED_CLUSTER,
    Association,
    Cue,
    CueRef,
    Engram,
    new_id,
    normalise_cue_name,
    utcnow,
)
from smriti.reads import Expand

if TYPE_CHECKING:
    from smriti.engine.core import Engine

MAX_CUES = 10
MAX_CUE_CHARS = 120


@dataclass(slots=True)
class StoreOutcome:
    """The stored engram, its cues and how many associations it got."""

    engram: Engram
    cues: list[Cue] = field(default_factory=list)
    associations: int = 0

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
            "cluster_id": e.cluster_id,
        }


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


def store(
    engine: Engine,
    content: object,
    importance: object = 0.5,
    tags: object = None,
    source: object = None,
    memory_id: object = None,
) -> StoreOutcome:
    """Validate, then remember ``content``; a failure leaves nothing stored.

    ``memory_id`` (optional) is the id the new memory gets. A store repeated with the
    same id (a client sending its request again after the owner process died before
    answering) finds the memory already there and returns it instead of storing it
    twice; the id is checked before anything is written, and the memory is written
    atomically, so either the first attempt is seen whole or the second one stores it.
    """
    text = validation.content(content, engine.settings.max_content_chars)
    weight = validation.importance(importance)
    tag_list = validation.tags(tags)
    origin = validation.source(source)
    chosen_id = new_id() if memory_id is None else validation.new_memory_id(memory_id)
    if memory_id is not None and (existing := stored_outcome(engine, chosen_id)) is not None:
        return existing

    extraction = engine.extractor.extract(text)
    refs = clean_cues(extraction.cues, tag_list)
    vector, cues = embed_memory(engine, text, refs)

    now = utcnow()
    memory_type = extraction.memory_type if extraction.memory_type in MEMORY_TYPES else "semantic"
    engram = Engram(
        id=chosen_id,
        content=text,
        summary=(extraction.summary or text).strip()[:1000],
        memory_type=memory_type,
        importance=weight,
        created_at=now,
        last_accessed_at=now,
        embedding=vector,
        source=origin,
        tags=tag_list,
        cluster_id=UNASSIGNED_CLUSTER,
    )

    def search() -> tuple[list[Association], int]:
        found, cluster = associate(engine, vector)
        edges = [Association(engram.id, target, sim, "semantic", now) for target, sim in found]
        return edges, cluster

    # The backend may run the search while it writes the rest of the memory.
    stored = engine.backend.add_memory_with_search(engram, cues, search)
    engine.after_write(stored.cues)
    return StoreOutcome(stored.engram, stored.cues, stored.associations)


def stored_outcome(engine: Engine, memory_id: str) -> StoreOutcome | None:
    """The outcome of an earlier store of ``memory_id``, or None if it is not stored."""
    found = engine.backend.get_engrams([memory_id])
    if not found:
        return None
    around = engine.backend.neighbourhood(
        Expand([memory_id], engine.settings.association_top_k, 0, 0)
    )
    cue_ids = {link.cue_id for link in around.links}
    # Rare (a retried request), so a scan beats a lookup every backend would need.
    cues = [c for c in engine.backend.iter_cues() if c.id in cue_ids] if cue_ids else []
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


def associate(engine: Engine, vector: np.ndarray) -> tuple[list[tuple[str, float]], int]:
    """Top-k similar engrams above the threshold, and the strongest one's cluster."""
    s = engine.settings
    if s.association_top_k == 0:
        return [], UNASSIGNED_CLUSTER
    hits = engine.backend.vector_search_above(vector, s.association_top_k, s.association_threshold)
    links = [(eid, float(score)) for eid, score in hits if score > s.association_threshold]
    if not links:
        return [], UNASSIGNED_CLUSTER
    strongest = engine.backend.get_engrams([links[0][0]])
    return links, strongest[0].cluster_id if strongest else UNASSIGNED_CLUSTER
