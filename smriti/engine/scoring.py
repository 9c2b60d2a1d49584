"""The cluster-aware composite score of recall (SPEC §6.6); weights are settings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from smriti.config import Settings
from smriti.model import UNASSIGNED_CLUSTER, Engram


@dataclass(slots=True, frozen=True)
class Weights:
    """Composite-score weights and penalties."""

    similarity: float = 0.4
    recency: float = 0.2
    importance: float = 0.2
    decay: float = 0.2
    cluster_penalty: float = 0.5

    @classmethod
    def from_settings(cls, settings: Settings) -> Weights:
        """Weights from ``WEIGHT_*`` and ``CLUSTER_PENALTY``."""
        return cls(
            settings.weight_similarity,
            settings.weight_recency,
            settings.weight_importance,
            settings.weight_decay,
            settings.cluster_penalty,
        )


def recency(engram: Engram, now: datetime) -> float:
    """1 / (1 + hours since last access / 24)."""
    hours = max(0.0, (now - engram.last_accessed_at).total_seconds() / 3600.0)
    return 1.0 / (1.0 + hours / 24.0)


def seed_cluster(direct_hits: Iterable[Engram]) -> int:
    """The most common assigned cluster among direct hits; ties go to the lowest id."""
    counts = Counter(e.cluster_id for e in direct_hits if e.cluster_id != UNASSIGNED_CLUSTER)
    if not counts:
        return UNASSIGNED_CLUSTER
    best = max(counts.values())
    return min(c for c, n in counts.items() if n == best)


def composite(
    engram: Engram, similarity: float, hop: int, seed: int, now: datetime, w: Weights
) -> float:
    """(w·sim + w·recency + w·importance + w·decay) × 1/(1+hop) × cluster penalty."""
    base = (
        w.similarity * similarity
        + w.recency * recency(engram, now)
        + w.importance * engram.importance
        + w.decay * engram.decay_factor
    )
    penalty = 1.0
    if hop > 0 and seed != UNASSIGNED_CLUSTER and engram.cluster_id != seed:
        penalty = w.cluster_penalty
    return base / (1.0 + hop) * penalty
