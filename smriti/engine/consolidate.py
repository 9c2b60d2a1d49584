"""Consolidation (SPEC §7): decay, prune, strengthen, orphan cleanup, Leiden, indexes."""

from __future__ import annotations

import json
import math
import time
from array import array
from collections.abc import Iterable
from concurrent import futures
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from smriti.backend import EngramStats
from smriti.clustering import ClusterResult
from smriti.model import Association, EngramUpdate, utcnow
from smriti.progress import Progress, ProgressArg, progress_bar

if TYPE_CHECKING:
    from smriti.engine.core import Engine

STRENGTHEN_MIN_ACCESSES = 5
STRENGTHEN_BELOW = 0.9
LEIDEN_STATE_KEY = "leiden_state"
#: A stored decay is rewritten only when it is this far from the computed value. Decay is
#: recomputed from the access time on every run (never compounded), so skipping tiny
#: changes loses nothing and spares rewriting every memory on every run.
DECAY_WRITE_TOLERANCE = 1e-3


@dataclass(slots=True)
class ConsolidationReport:
    """What one consolidation run changed."""

    decayed: int = 0
    pruned: int = 0
    strengthened: int = 0
    orphan_cues_removed: int = 0
    clusters: int = 0
    reclustered: int = 0
    indexes_created: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return asdict(self)


def decay_of(stats: EngramStats, now: datetime, rate: float) -> tuple[float, bool]:
    """exp(-rate · days since last access), plus the frequent-access bonus.

    Computed from the stored access time, so the result does not depend on how often
    consolidation runs. Returns (decay, strengthened).
    """
    days = max(0.0, (now - stats.last_accessed_at).total_seconds() / 86400.0)
    decay = math.exp(-rate * days)
    if stats.access_count > STRENGTHEN_MIN_ACCESSES and decay < STRENGTHEN_BELOW:
        return min(1.0, decay + min(0.01 * stats.access_count, 0.1)), True
    return decay, False


def consolidate(engine: Engine, progress: ProgressArg = False) -> ConsolidationReport:
    """Run every consolidation step once; writes are batched.

    ``progress`` (see ``smriti.progress``) follows the phases: reading the memories,
    pruning and clustering, writing the updates. Off by default: periodic runs draw
    nothing.

    Clustering reads only the associations among the engrams that are kept, which the
    prune and orphan-cue deletes do not change, so it runs on the engine's helper thread
    while they go on (Kùzu releases the GIL while it deletes). The new decay factors and
    cluster ids are then written together, one update per engram. The result is the same
    as running the steps one after another.
    """
    started = time.perf_counter()
    report = ConsolidationReport()
    now = utcnow()
    with progress_bar(progress, "consolidating: memories", engine.backend.count_engrams()) as bar:
        _consolidate(engine, report, now, bar)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _consolidate(engine: Engine, report: ConsolidationReport, now: datetime, bar: Progress) -> None:
    """The steps of ``consolidate``, reporting to ``bar``."""
    s = engine.settings
    prune: list[EngramStats] = []
    decays: dict[str, float] = {}
    kept: dict[str, int] = {}
    for stats in engine.backend.engram_stats():
        bar.advance()
        decay, strengthened = decay_of(stats, now, s.decay_rate)
        if decay < s.prune_decay_threshold and stats.importance < s.prune_importance_threshold:
            prune.append(stats)
            continue
        kept[stats.id] = stats.cluster_id
        report.strengthened += strengthened
        if abs(decay - stats.decay_factor) > DECAY_WRITE_TOLERANCE:
            decays[stats.id] = decay
    report.decayed = len(decays)
    clustering = None
    if engine.clusterer is not None and len(kept) >= 3:
        state = json.loads(engine.backend.get_meta(LEIDEN_STATE_KEY) or "{}")
        clustering = engine.helper().submit(partition, engine, kept, state)
    bar.set_label("consolidating: pruning", len(prune))
    try:
        report.pruned = prune_engrams(engine, prune)
        bar.advance(len(prune))
        report.orphan_cues_removed = engine.backend.delete_orphan_cues()
    except BaseException:
        if clustering is not None:
            futures.wait([clustering])  # the helper is free again when this returns
        raise
    if clustering is not None:
        bar.set_label("consolidating: clustering (Leiden)", len(kept))
    result = clustering.result() if clustering is not None else None
    clusters: dict[str, int] = {}
    if result is not None:
        clusters = {i: c for i, c in result.membership.items() if kept.get(i) != c}
        report.clusters = len(set(result.membership.values()))
        report.reclustered = len(clusters)
    # One call: backends batch internally, and Kùzu stages large update sets (one COPY
    # and one join instead of a transaction per 2,000 rows).
    updates = [EngramUpdate(i, decay_factor=decays.get(i), cluster_id=clusters.get(i))
               for i in dict.fromkeys([*decays, *clusters])]  # fmt: skip
    bar.set_label("consolidating: writing", len(updates))
    engine.backend.update_engrams(updates)
    bar.advance(len(updates))
    if result is not None:
        engine.backend.set_meta(LEIDEN_STATE_KEY, json.dumps(result.state))
    if engine.embedder.dims:
        report.indexes_created = engine.backend.ensure_indexes(
            engine.embedder.dims, s.index_threshold
        )


def prune_engrams(engine: Engine, weak: list[EngramStats]) -> int:
    """Delete weak engrams, each with a ``prune`` tombstone recorded first.

    The tombstone lets backups from other machines drop their copy too, unless that
    copy was accessed after the pruned version (then it is no longer weak and stays).
    """
    from smriti.portable import tombstones

    with tombstones.LOCK:
        tombstones.record(engine.backend, (tombstones.pruned(s) for s in weak))
        return engine.backend.delete_engrams([s.id for s in weak])


def partition(
    engine: Engine, previous: dict[str, int], state: dict[str, object]
) -> ClusterResult | None:
    """Leiden over the undirected AssociatedWith graph of the ``previous`` engrams (None
    when they have no association among them)."""
    assert engine.clusterer is not None
    nodes = sorted(previous)
    edges = undirected_edges(nodes, engine.backend.iter_associations())
    if not edges:
        return None
    return engine.clusterer.cluster(nodes, edges, state, previous)


def undirected_edges(
    nodes: list[str], associations: Iterable[Association]
) -> list[tuple[str, str, float]]:
    """One (a, b, strongest weight) per pair of ``nodes`` (sorted), a < b, in pair order.

    Self-loops and edges to engrams outside ``nodes`` are dropped. Sorting integer pair
    keys with numpy instead of string tuples saves seconds at 100k memories.
    """
    index = {node: i for i, node in enumerate(nodes)}
    # Typed arrays, not lists: 300,000 edges as Python ints and floats are ~30 MB more
    # at the peak of a consolidation.
    ends = array("q")
    weights = array("d")
    for edge in associations:
        a, b = index.get(edge.source_id), index.get(edge.target_id)
        if a is None or b is None or a == b:
            continue
        ends.extend((a, b) if a < b else (b, a))
        weights.append(edge.strength)
    if not weights:
        return []
    pairs = np.frombuffer(ends, dtype=np.int64).reshape(-1, 2)
    strength = np.frombuffer(weights, dtype=np.float64)
    keys = pairs[:, 0] * len(nodes) + pairs[:, 1]
    order = np.lexsort((-strength, keys))  # by pair, strongest first within a pair
    first = np.ones(order.size, dtype=bool)
    first[1:] = keys[order][1:] != keys[order][:-1]
    keep = order[first]
    return [
        (nodes[a], nodes[b], w)
        for (a, b), w in zip(pairs[keep].tolist(), strength[keep].tolist(), strict=True)
    ]
