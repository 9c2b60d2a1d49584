"""Everything about one memory, for a page or a resource that shows it whole.

``memory_details`` gathers what ``smriti_manage get`` returns (the memory, its cues,
its associations both ways) and adds what a person looking at one memory wants next
to it: every version of it with dates, the memories merged into them, and its
cluster, named by its most specific cues with a few of its other members. The MCP
resource ``memory://{id}`` (``smriti.mcp_server.resources``) and the web page
(``smriti.webui``) both show this dict, through the ``DetailsRequest`` of
``smriti.requests`` when the store has an owner process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smriti.backend import Listing
from smriti.engine import versions
from smriti.graphview.labels import SAMPLE, cluster_name, sample_cues, top_cues
from smriti.model import Engram

if TYPE_CHECKING:
    from smriti.engine.core import Engine

#: Other members of the memory's cluster listed with it.
CLUSTER_MEMBERS = 10


def memory_details(engine: Engine, memory_id: object) -> dict[str, Any]:
    """One memory of ``engine``'s user, in full. NotFound for an unknown id or one of
    another user (the same answer: ids of others are never confirmed).

    Keys: ``memory`` (every field, ``smriti.engine.versions.memory_out``: content,
    tags, origin, principal, importance, decay, access count and dates), ``cues``
    (name, type), ``associations`` (id, summary, direction ``out``/``in``, relation,
    strength; strongest first), ``versions`` (oldest first: id, summary, created_at,
    superseded_at, ``current`` for the one no correction replaced), ``merged`` (the
    memories folded into any version: id, summary, created_at, merged_at) and
    ``cluster`` (id, label, top_cues, a few other ``members``; None when the memory
    is in no cluster yet).
    """
    found = versions.get(engine, memory_id)
    memory = found["memory"]
    chain = _engrams(engine, found["versions"])
    merged = _engrams(engine, [i for v in chain for i in versions.merged_into(engine, v)])
    return {
        "memory": memory,
        "cues": found["cues"],
        "associations": found["associations"],
        "versions": [_version(v) for v in chain],
        "merged": [_merged(m) for m in sorted(merged, key=_merged_order)],
        "cluster": cluster_of(engine, memory["id"], int(memory["cluster_id"])),
    }


def cluster_of(engine: Engine, memory_id: str, cluster: int) -> dict[str, Any] | None:
    """The cluster ``cluster`` as seen from one of its memories: its label from the
    most specific cues of up to ``SAMPLE`` of its current memories (as ``smriti
    clusters`` names it), and up to ``CLUSTER_MEMBERS`` other members, most recently
    used first. None for ``-1`` (not clustered yet)."""
    if cluster < 0:
        return None
    backend = engine.backend
    listing = Listing(SAMPLE, cluster_id=cluster, include_superseded=False)
    ids = [e.id for e in backend.list_page(listing)]
    counts = sample_cues(backend, {cluster: ids}, max(backend.count_engrams(), 1))
    best = top_cues(counts, cluster)
    names = {c.id: c.name for c in backend.get_cues_by_id(best)} if best else {}
    cues = [names.get(c, c) for c in best]
    others = _engrams(engine, [i for i in ids if i != memory_id][:CLUSTER_MEMBERS])
    return {
        "id": cluster,
        "label": cluster_name(cluster, cues),
        "top_cues": cues,
        "members": [{"id": e.id, "summary": e.summary} for e in others],
        "more": len(ids) - (memory_id in ids) > len(others),
    }


def _version(e: Engram) -> dict[str, Any]:
    return {
        "id": e.id,
        "summary": e.summary,
        "created_at": e.created_at.isoformat(),
        "superseded_at": e.superseded_at.isoformat() if e.superseded_at else None,
        "current": not e.is_superseded,
    }


def _merged(e: Engram) -> dict[str, Any]:
    return {
        "id": e.id,
        "summary": e.summary,
        "created_at": e.created_at.isoformat(),
        "merged_at": e.superseded_at.isoformat() if e.superseded_at else None,
    }


def _merged_order(e: Engram) -> tuple[str, str]:
    return (e.superseded_at or e.created_at).isoformat(), e.id


def _engrams(engine: Engine, ids: list[str]) -> list[Engram]:
    """The engrams ``ids`` in that order (forgotten ones left out)."""
    if not ids:
        return []
    found = {e.id: e for e in engine.backend.get_engrams(ids, embeddings=False)}
    return [found[i] for i in ids if i in found]
