"""Reading one memory, correcting it with its history kept, updating it, and what is
related to it.

A correction stores the new text as a new memory whose ``supersedes`` names the old
one, with a ``supersedes`` association to it; the old one is kept and marked
``superseded_by``/``superseded_at``, so recall leaves it out unless asked and
``history`` can walk the chain both ways. The new version inherits the old one's
associations (to memories that are still current), so what was linked to the fact
stays linked to its corrected form. The new version is written first and the old one
marked second: a crash in between leaves both current (nothing lost), and the
client's retry with the same new id completes the marking.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from smriti import secrets, validation
from smriti.backend import Expand, Listing
from smriti.engine.contiguity import FOLLOWS
from smriti.engine.store import Correction, StoreOutcome, store
from smriti.errors import InvalidInput, NotFound
from smriti.model import Association, Engram, EngramUpdate, utcnow
from smriti.requests import RELATED_MAX, CorrectRequest, StoreRequest

if TYPE_CHECKING:
    from smriti.engine.core import Engine

#: Longest version chain walked (a guard against a cycle in imported data).
MAX_VERSIONS = 1000
#: The relation type of the edge from a survivor to each memory merged into it
#: (``smriti.engine.tidy``).
MERGED = "merged"
#: Relations that are version bookkeeping, not associations a correction carries over.
VERSION_RELATIONS = ("supersedes", MERGED)
#: Cues encoding more engrams than this say little about relatedness.
RELATED_CUE_MAX_DEGREE = 50


def memory_out(e: Engram) -> dict[str, Any]:
    """The tool-facing form of one memory in full (no embedding)."""
    return {
        **e.to_dict(),
        "decay_factor": round(e.decay_factor, 4),
        "superseded_at": e.superseded_at.isoformat() if e.superseded_at else None,
    }


def fetch(engine: Engine, memory_id: object, action: str) -> Engram:
    """This user's memory ``memory_id``; NotFound for unknown or foreign ids."""
    key = validation.memory_id(memory_id, action)
    found = engine.backend.get_engrams([key], embeddings=False)
    if not found:
        raise NotFound(f"no memory with id {key!r} for user {engine.user!r}")
    return found[0]


def get(engine: Engine, memory_id: object) -> dict[str, Any]:
    """One memory with its cues, associations (both directions) and version chain."""
    e = fetch(engine, memory_id, "get")
    around = engine.backend.neighbourhood(Expand([e.id], RELATED_MAX, 0, 0))
    cues = engine.backend.get_cues_by_id(list({link.cue_id for link in around.links}))
    others = {x.id: x for x in _engrams(engine, _ends(around.associations, e.id))}
    associations = [
        {
            "id": other,
            "summary": others[other].summary,
            "direction": "out" if a.source_id == e.id else "in",
            "relation": a.relation_type,
            "strength": round(a.strength, 4),
        }
        for a in sorted(around.associations, key=lambda a: -a.strength)
        if (other := a.target_id if a.source_id == e.id else a.source_id) in others
    ]
    return {
        "memory": memory_out(e),
        "cues": [{"name": c.name, "type": c.cue_type} for c in sorted(cues, key=lambda c: c.name)],
        "associations": associations,
        "versions": [v.id for v in chain(engine, e)],
    }


def chain(engine: Engine, e: Engram) -> list[Engram]:
    """Every version of ``e``'s memory, oldest first (``e`` included)."""
    seen = {e.id}
    older = _follow(engine, e, "supersedes", seen)
    newer = _follow(engine, e, "superseded_by", seen)
    return [*reversed(older), e, *newer]


def _follow(engine: Engine, e: Engram, link: str, seen: set[str]) -> list[Engram]:
    """The versions reached from ``e`` by its ``link`` field, nearest first; stops at a
    missing (forgotten) version or one already in ``seen`` (a cycle in imported data)."""
    out: list[Engram] = []
    here = e
    while getattr(here, link) and len(seen) < MAX_VERSIONS:
        found = _engrams(engine, [getattr(here, link)])
        if not found or found[0].id in seen:
            break
        here = found[0]
        seen.add(here.id)
        out.append(here)
    return out


def history(engine: Engine, memory_id: object) -> dict[str, Any]:
    """The version chain of a memory, oldest first, and the memories merged into each
    version (``smriti.engine.tidy``)."""
    e = fetch(engine, memory_id, "show the history of")
    versions = chain(engine, e)
    merged = _engrams(engine, [i for v in versions for i in merged_into(engine, v)])
    return {
        "memory_id": e.id,
        "versions": [memory_out(v) for v in versions],
        "merged": [memory_out(m) for m in sorted(merged, key=lambda m: (m.superseded_at, m.id))],
    }


def merged_into(engine: Engine, e: Engram) -> list[str]:
    """Ids of the memories merged into ``e``."""
    around = engine.backend.neighbourhood(Expand([e.id], RELATED_MAX, 0, 0))
    return [
        a.target_id
        for a in around.associations
        if a.relation_type == MERGED and a.source_id == e.id
    ]


def correct(engine: Engine, request: CorrectRequest) -> dict[str, Any]:
    """Store ``request.content`` as the new version of ``request.memory_id`` and mark the
    old one.

    Importance, tags and origin default to the old version's; ``request.principal`` is
    the authenticated caller making the correction ("" for none). Correcting a superseded
    memory is refused with the id of its current version, unless this is the retry of the
    call that superseded it (same ``new_id``), which then returns the same answer.
    """
    old = fetch(engine, request.memory_id, "correct")
    if old.superseded_by and old.superseded_by != request.new_id:
        raise InvalidInput(
            f"memory {old.id} was already corrected by {old.superseded_by}; correct "
            f"{_current(engine, old).id} (its current version) instead"
        )
    carried = _carried(engine, old)
    # The correction request checked all but the content's length, which needs the
    # settings; the old version's values are valid as they are.
    version = StoreRequest(
        content=validation.content(request.content, engine.settings.max_content_chars),
        importance=old.importance if request.importance is None else request.importance,
        tags=tuple(old.tags) if request.tags is None else request.tags,
        source=old.source or "",
        memory_id=request.new_id,
        origin=old.origin if request.origin is None else request.origin,
        principal=request.principal,
    )
    with engine.writes.shared():
        outcome: StoreOutcome = store(engine, version, Correction(old, tuple(carried)))
        new = outcome.engram
        if new.supersedes != old.id:
            raise InvalidInput(
                f"memory id {new.id} is already used by another memory; retry without it"
            )
        if not old.superseded_by:
            engine.backend.update_engrams(
                [EngramUpdate(old.id, superseded_by=new.id, superseded_at=utcnow())]
            )
        engine.dirty.set()
    return {"new_id": new.id, "superseded": old.id, "memory": outcome.to_dict()}


def _current(engine: Engine, e: Engram) -> Engram:
    return chain(engine, e)[-1]


def _carried(engine: Engine, old: Engram) -> list[Association]:
    """The old version's associations to memories that are still current, as edges
    to carry over (their source is replaced by the new version's id)."""
    around = engine.backend.neighbourhood(Expand([old.id], RELATED_MAX, 0, 0))
    # A correction takes the old version's associations, not its place in time.
    edges = [a for a in around.associations if a.relation_type not in (*VERSION_RELATIONS, FOLLOWS)]
    current = {e.id for e in _engrams(engine, _ends(edges, old.id)) if not e.is_superseded}
    out: dict[str, Association] = {}
    for a in edges:
        other = a.target_id if a.source_id == old.id else a.source_id
        if other in current and (other not in out or out[other].strength < a.strength):
            out[other] = Association(old.id, other, a.strength, a.relation_type, a.created_at)
    return list(out.values())


def update(
    engine: Engine, memory_id: object, importance: object = None, tags: object = None
) -> dict[str, Any]:
    """Change a memory's importance and/or tags in place (no new version)."""
    e = fetch(engine, memory_id, "update")
    if importance is None and tags is None:
        raise InvalidInput("give importance and/or tags to update")
    weight = None if importance is None else validation.importance(importance)
    labels = None if tags is None else validation.tags(tags)
    hidden: list[dict[str, object]] = []
    if labels is not None:  # tags are user text: screened as a store screens them
        labels, hidden = secrets.screen_tags(engine.settings.secrets, labels)
    with engine.writes.shared():
        engine.backend.update_engrams([EngramUpdate(e.id, importance=weight, tags=labels)])
    engine.dirty.set()
    changed = e.with_changes(
        importance=e.importance if weight is None else weight,
        tags=e.tags if labels is None else labels,
    )
    return {"memory": memory_out(changed), "redacted": hidden}


def related(engine: Engine, memory_id: object, limit: object = 10) -> dict[str, Any]:
    """Memories linked to ``memory_id``, strongest first: associations in both
    directions (and version links), memories sharing a specific cue, then memories of
    the same cluster. Strength is the edge's for associations and versions, 1/(1 +
    ln degree) for a shared cue (rarer cues say more), and 0.1 for the cluster."""
    e = fetch(engine, memory_id, "find what is related to")
    count = validation.limit(limit, RELATED_MAX)
    around = engine.backend.neighbourhood(
        Expand([e.id], RELATED_MAX, RELATED_CUE_MAX_DEGREE, RELATED_CUE_MAX_DEGREE)
    )
    found: dict[str, tuple[str, float, str]] = {}

    def offer(other: str, relation: str, strength: float, via: str = "") -> None:
        if other != e.id and (other not in found or found[other][1] < strength):
            found[other] = (relation, strength, via)

    for a in around.associations:
        out = a.source_id == e.id
        relation = a.relation_type if a.relation_type != "semantic" else "association"
        if a.relation_type == "supersedes" and not out:
            relation = "superseded_by"
        elif a.relation_type == FOLLOWS and not out:
            relation = "followed_by"
        elif a.relation_type == MERGED and not out:
            relation = "merged_into"
        offer(a.target_id if out else a.source_id, relation, a.strength)
    if e.superseded_by:
        offer(e.superseded_by, "superseded_by", 1.0)
    if e.supersedes:
        offer(e.supersedes, "supersedes", 1.0)
    names = _cue_names(engine, around.members)
    for cue_id, members in around.members.items():
        degree = around.degrees.get(cue_id, 0)
        if 1 < degree <= RELATED_CUE_MAX_DEGREE:
            strength = 1.0 / (1.0 + math.log(degree))
            for other, _ in members:
                offer(other, "shared_cue", strength, names.get(cue_id, ""))
    if len(found) < count and e.cluster_id >= 0:
        same = Listing(count + 1, cluster_id=e.cluster_id, include_superseded=False)
        for other in engine.backend.list_page(same):
            offer(other.id, "cluster", 0.1)
    order = sorted(found, key=lambda i: (-found[i][1], i))
    engrams = {x.id: x for x in _engrams(engine, order[: count * 2])}
    out = [
        {"id": i, "summary": engrams[i].summary, "relation": found[i][0],
         "strength": round(found[i][1], 4), "via": found[i][2]}
        for i in order if i in engrams
    ][:count]  # fmt: skip
    return {"memory_id": e.id, "related": out}


def _cue_names(engine: Engine, members: dict[str, list[tuple[str, float]]]) -> dict[str, str]:
    return {c.id: c.name for c in engine.backend.get_cues_by_id(list(members))}


def _ends(edges: Sequence[Association], here: str) -> list[str]:
    return list({a.target_id if a.source_id == here else a.source_id for a in edges})


def _engrams(engine: Engine, ids: Sequence[str]) -> list[Engram]:
    return engine.backend.get_engrams(list(ids), embeddings=False) if ids else []
