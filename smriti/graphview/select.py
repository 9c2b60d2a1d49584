"""Choose the part of a memory graph to draw, and summarise its clusters.

These run where the store is (the owner process, or the process that opened it) and
return JSON-ready dicts; layout and drawing happen in the process that asked.

The strength of a memory, which ``--limit`` keeps the strongest by, is
``importance · decay · (1 + ln(1 + access count))``: an important memory that is
still fresh and often used is kept first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from smriti.backend import EngramStats, Expand
from smriti.errors import InvalidInput, NotFound
from smriti.graphview import DEFAULT_LIMIT
from smriti.graphview.labels import CueCounts, cluster_name, sample_cues, top_cues
from smriti.model import Cue

if TYPE_CHECKING:
    from smriti.backend import StorageBackend
    from smriti.engine import Engine

#: Association edges read per memory and direction.
ASSOCIATIONS_PER_MEMORY = 20
#: Memories followed per shared cue when walking ``--around`` a memory.
MEMORIES_PER_CUE = 25
#: Every cue is followed in a neighbourhood, hubs included (MEMORIES_PER_CUE bounds them).
ANY_DEGREE = 2**31 - 1
#: A selection this small shows every cue of its memories; larger ones only the cues
#: two or more of them share (the rest add dots, not structure).
ALL_CUES_UP_TO = 40
SUMMARY_CHARS = 160


def strength(stats: EngramStats) -> float:
    """How strongly a memory is held (see the module docstring)."""
    return stats.importance * stats.decay_factor * (1.0 + math.log1p(max(0, stats.access_count)))


def select_graph(
    engine: Engine,
    cluster: int | None = None,
    around: str | None = None,
    hops: int = 2,
    limit: int = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """The subgraph to draw: memories, cues, edges, cluster legend and counts.

    ``cluster`` keeps one cluster; ``around`` a memory and what lies within ``hops``
    steps of it over associations and shared cues (nearest first); ``limit`` the
    strongest memories of what is left. NotFound when ``around`` is not a memory or no
    memory is in ``cluster``.
    """
    if limit < 1 or hops < 0:
        raise InvalidInput("limit must be at least 1 and hops at least 0")
    backend = engine.backend
    stats = {s.id: s for s in backend.engram_stats()}
    order = strongest_first(stats)
    hop_of: dict[str, int] = {}
    if around:
        if around not in stats:
            raise NotFound(f"no memory with id {around!r} for user {engine.user!r}")
        hop_of = neighbourhood(backend, around, hops, stats, budget=20 * limit)
        rank = {i: n for n, i in enumerate(order)}
        candidates = sorted(hop_of, key=lambda i: (hop_of[i], rank[i]))
    else:
        candidates = order
    if cluster is not None:
        candidates = [i for i in candidates if stats[i].cluster_id == cluster]
        if not candidates and not around:
            known = sorted({s.cluster_id for s in stats.values()})
            listed = ", ".join(str(k) for k in known[:20]) or "none yet"
            raise NotFound(
                f"no memory is in cluster {cluster} (clusters: {listed}; -1 is unassigned, "
                "and `smriti clusters` lists them)"
            )
    chosen = candidates[:limit]
    shown = {stats[i].cluster_id for i in chosen}
    members = {k: v for k, v in by_cluster(order, stats).items() if k in shown}
    data = _subgraph(backend, chosen, stats, hop_of, sample_cues(backend, members, len(stats)))
    data.update(
        total_memories=len(stats),
        candidates=len(candidates),
        limit=limit,
        limited=len(candidates) > limit,
        filters={"cluster": cluster, "around": around, "hops": hops if around else None},
    )
    return data


def strongest_first(stats: Mapping[str, EngramStats]) -> list[str]:
    """Memory ids by strength, strongest first (ties by id)."""
    power = {i: strength(s) for i, s in stats.items()}
    return sorted(power, key=lambda i: (-power[i], i))


def by_cluster(order: Sequence[str], stats: Mapping[str, EngramStats]) -> dict[int, list[str]]:
    """Cluster id -> its memory ids, in ``order``."""
    out: dict[int, list[str]] = {}
    for engram_id in order:
        out.setdefault(stats[engram_id].cluster_id, []).append(engram_id)
    return out


def neighbourhood(
    backend: StorageBackend,
    start: str,
    hops: int,
    known: Mapping[str, EngramStats],
    budget: int,
) -> dict[str, int]:
    """Memory id -> hop for ``start`` and the memories within ``hops`` steps of it,
    through associations (either direction) and shared cues. Stops growing once
    ``budget`` memories are found (a hub cue could reach the whole store)."""
    hop_of = {start: 0}
    frontier = [start]
    for hop in range(1, hops + 1):
        if not frontier or len(hop_of) >= budget:
            break
        reached: set[str] = set()
        around = backend.neighbourhood(
            Expand(frontier, ASSOCIATIONS_PER_MEMORY, ANY_DEGREE, MEMORIES_PER_CUE)
        )
        for edge in around.associations:
            reached.update((edge.source_id, edge.target_id))
        for members in around.members.values():
            reached.update(engram_id for engram_id, _ in members)
        frontier = sorted(i for i in reached if i not in hop_of and i in known)
        for engram_id in frontier:
            hop_of[engram_id] = hop
    return hop_of


def _subgraph(
    backend: StorageBackend,
    chosen: list[str],
    stats: Mapping[str, EngramStats],
    hop_of: Mapping[str, int],
    counts: CueCounts,
) -> dict[str, Any]:
    members = set(chosen)
    engrams = {e.id: e for e in backend.get_engrams(chosen)} if chosen else {}
    links = backend.neighbourhood(Expand(chosen, 0, 0, 0)).links if chosen else []
    degree = Counter(link.cue_id for link in links)
    shown = {c for c, n in degree.items() if n >= 2 or len(chosen) <= ALL_CUES_UP_TO}
    clusters = sorted({stats[i].cluster_id for i in chosen})
    sizes = Counter(s.cluster_id for s in stats.values())
    labels = {k: top_cues(counts, k) for k in clusters}
    found = cues_by_id(backend, shown | {c for ids in labels.values() for c in ids})
    names = {c: cue.name for c, cue in found.items()}
    nodes = []
    for engram_id in chosen:
        s, engram = stats[engram_id], engrams.get(engram_id)
        text = (engram.summary or engram.content) if engram is not None else ""
        node = {
            "id": engram_id,
            "summary": _cut(text),
            "memory_type": engram.memory_type if engram is not None else "",
            "cluster": s.cluster_id,
            "importance": round(s.importance, 4),
            "access_count": s.access_count,
            "decay": round(s.decay_factor, 4),
            "strength": round(strength(s), 4),
        }
        if hop_of:
            node["hop"] = hop_of[engram_id]
        nodes.append(node)
    cues = [
        {
            "id": c,
            "name": names.get(c, c),
            "type": found[c].cue_type if c in found else "",
            "memories": degree[c],
        }
        for c in sorted(shown)
    ]
    return {
        "nodes": nodes,
        "cues": cues,
        "cue_edges": sorted({(x.engram_id, x.cue_id) for x in links if x.cue_id in shown}),
        "associations": _associations(backend, chosen, members),
        "clusters": [
            {
                "id": k,
                "size": sizes[k],
                "shown": sum(1 for i in chosen if stats[i].cluster_id == k),
                "top_cues": [names.get(c, c) for c in labels[k]],
                "label": cluster_name(k, [names.get(c, c) for c in labels[k]]),
            }
            for k in clusters
        ],
    }


def _associations(
    backend: StorageBackend, chosen: list[str], members: set[str]
) -> list[tuple[str, str, float]]:
    """Undirected association edges among ``members``, strongest weight per pair."""
    best: dict[tuple[str, str], float] = {}
    if not chosen:
        return []
    for edge in backend.neighbourhood(Expand(chosen, ASSOCIATIONS_PER_MEMORY, 0, 0)).associations:
        a, b = edge.source_id, edge.target_id
        if a == b or a not in members or b not in members:
            continue
        key = (a, b) if a < b else (b, a)
        best[key] = max(best.get(key, 0.0), float(edge.strength))
    return [(a, b, round(w, 4)) for (a, b), w in sorted(best.items())]


def cues_by_id(backend: StorageBackend, ids: Iterable[str]) -> dict[str, Cue]:
    """The cues with these ids (one pass over the cues)."""
    wanted = set(ids)
    if not wanted:
        return {}
    return {cue.id: cue for cue in backend.iter_cues() if cue.id in wanted}


def _cut(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= SUMMARY_CHARS else flat[: SUMMARY_CHARS - 1] + "…"


def cluster_table(engine: Engine) -> dict[str, Any]:
    """Every cluster, largest first: size, most specific cues and its strongest memory."""
    backend = engine.backend
    stats = {s.id: s for s in backend.engram_stats()}
    members = by_cluster(strongest_first(stats), stats)
    counts = sample_cues(backend, members, len(stats))
    labels = {k: top_cues(counts, k) for k in members}
    found = cues_by_id(backend, (c for ids in labels.values() for c in ids))
    samples = {e.id: e for e in backend.get_engrams([ids[0] for ids in members.values()])}
    rows = []
    for k in sorted(members, key=lambda k: (k < 0, -len(members[k]), k)):
        sample = samples.get(members[k][0])
        rows.append(
            {
                "id": k,
                "size": len(members[k]),
                "top_cues": [found[c].name if c in found else c for c in labels[k]],
                "sample": {
                    "id": members[k][0],
                    "summary": _cut(sample.summary or sample.content) if sample else "",
                },
            }
        )
    return {"total_memories": len(stats), "clusters": rows}
