"""Names for clusters: the cues most specific to each (frequent inside, rare outside).

A cue's score in cluster ``k`` is tf-idf with memories as documents:
``(memories of k with the cue / size of k) · ln(memories / memories with the cue)``.
A cue every memory carries scores 0; a cue only this cluster's memories carry, and
most of them, scores highest.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from smriti.model import Link

#: Cues named per cluster.
TOP_CUES = 3


@dataclass(slots=True)
class CueCounts:
    """How often each cue encodes memories, in all and per cluster."""

    total: int
    sizes: Counter[int] = field(default_factory=Counter)
    per_cluster: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    df: Counter[str] = field(default_factory=Counter)


def count_cues(cluster_of: Mapping[str, int], links: Iterable[Link]) -> CueCounts:
    """Cue frequencies per cluster, from every EncodedBy link of the memories in
    ``cluster_of`` (memory id -> cluster id); links of other memories are skipped."""
    counts = CueCounts(total=len(cluster_of), sizes=Counter(cluster_of.values()))
    for link in links:
        cluster = cluster_of.get(link.engram_id)
        if cluster is None:
            continue
        counts.df[link.cue_id] += 1
        counts.per_cluster[cluster][link.cue_id] += 1
    return counts


def top_cues(counts: CueCounts, cluster: int, k: int = TOP_CUES) -> list[str]:
    """The ids of the ``k`` cues most specific to ``cluster``, best first (ties by id)."""
    size = counts.sizes.get(cluster, 0)
    if not size:
        return []
    scored = []
    for cue, n in counts.per_cluster.get(cluster, Counter()).items():
        score = (n / size) * math.log(counts.total / counts.df[cue])
        if score > 0:
            scored.append((-score, cue))
    return [cue for _, cue in sorted(scored)[:k]]


def cluster_name(cluster: int, cue_names: list[str]) -> str:
    """A legend label: ``cluster 3: pasta, basil, recipe`` (``unassigned`` for -1)."""
    head = "unassigned" if cluster < 0 else f"cluster {cluster}"
    return f"{head}: {', '.join(cue_names)}" if cue_names else head
