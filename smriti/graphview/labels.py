"""Names for clusters: the cues most specific to each (frequent inside, rare outside).

A cue's score in cluster ``k`` is tf-idf with memories as documents:
``(memories of k with the cue / size of k) · ln(memories / memories with the cue)``,
the first fraction taken over a sample of the cluster's strongest memories. A cue
every memory carries scores 0; a cue only this cluster's memories carry, and most of
them, scores highest.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from smriti.backend import Expand

if TYPE_CHECKING:
    from smriti.backend import StorageBackend

#: Cues named per cluster.
TOP_CUES = 3
#: Memories per cluster whose cues are counted.
SAMPLE = 200


@dataclass(slots=True)
class CueCounts:
    """Cue frequencies in a sample of each cluster, and in the whole store."""

    #: Memories in the store.
    total: int
    #: Memories sampled per cluster.
    sizes: Counter[int] = field(default_factory=Counter)
    #: Per cluster, how many sampled memories each cue encodes.
    per_cluster: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: How many memories of the whole store each cue encodes.
    df: Mapping[str, int] = field(default_factory=dict)


def sample_cues(
    backend: StorageBackend, members: Mapping[int, Sequence[str]], total: int
) -> CueCounts:
    """Cue counts over up to ``SAMPLE`` memories of each cluster (``members``: cluster
    id -> memory ids, the ones to sample first first), with each cue's degree in the
    whole store. Reading every link of a 100k-memory store takes seconds; a sample of
    a cluster's strongest memories names it as well."""
    sample = {k: list(ids[:SAMPLE]) for k, ids in members.items()}
    cluster_of = {i: k for k, ids in sample.items() for i in ids}
    counts = CueCounts(total=total, sizes=Counter({k: len(v) for k, v in sample.items()}))
    around = backend.neighbourhood(Expand(list(cluster_of), 0, 0, 0)) if cluster_of else None
    for link in around.links if around else []:
        counts.per_cluster[cluster_of[link.engram_id]][link.cue_id] += 1
    counts.df = dict(around.degrees) if around else {}
    return counts


def top_cues(counts: CueCounts, cluster: int, k: int = TOP_CUES) -> list[str]:
    """The ids of the ``k`` cues most specific to ``cluster``, best first (ties by id)."""
    size = counts.sizes.get(cluster, 0)
    if not size:
        return []
    scored = []
    for cue, n in counts.per_cluster.get(cluster, Counter()).items():
        score = (n / size) * math.log(counts.total / max(n, counts.df.get(cue, n)))
        if score > 0:
            scored.append((-score, cue))
    return [cue for _, cue in sorted(scored)[:k]]


def cluster_name(cluster: int, cue_names: list[str]) -> str:
    """A legend label: ``cluster 3: pasta, basil, recipe`` (``unassigned`` for -1)."""
    head = "unassigned" if cluster < 0 else f"cluster {cluster}"
    return f"{head}: {', '.join(cue_names)}" if cue_names else head
